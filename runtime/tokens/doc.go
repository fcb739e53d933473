// Package tokens is the platform's deterministic stand-in tokenizer. The
// engine simulator counts prompt and generated tokens with it, so its counts
// are the "exact" ones every other part (gateway reservations, the ledger,
// metering checks) is compared against; EstimateChat is the cheap upper
// bound the gateway reserves credit with before the engine has counted.
package tokens
