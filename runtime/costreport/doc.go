// Package costreport is the weekly cost review and the ledger-drift SLI
// that docs/requirements.md asks for: per model, the GPU-hours the fleet ran, the tokens the ledger settled
// (per team), what the GPU time cost and what a million output tokens cost,
// the GPU-hours that served nothing, and how far the ledger's settled
// completion tokens drift from the engines' own vllm:generation_tokens_total.
//
// Tokens always come from the ledger (settled rows created in the window).
// GPU time comes from one of two sources: the node registry's events
// (register opens a node's up interval, drain or deregister closes it, times
// the node's GPUs), or Prometheus (engine-hours of each model's vLLM series
// times the GPUs per replica of its capacity profile). Engine token counts
// for drift come from Prometheus or from /metrics snapshots taken at the
// ends of the window.
//
// Idle GPU time has one definition for both sources: a model's GPU time in
// the UTC clock hours in which no settled request of that model arrived
// (for Prometheus, hours in which its engines generated no token). Nodes
// that registered no model are idle all the time they are up.
package costreport
