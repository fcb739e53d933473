// Package frontdoor assembles the gateway process from its parts: the key
// cache and its revocation feed, the Redis limits and model queue, the
// ledger, the admin API, the gateway itself and a metrics listener of its
// own. The production `llmplat gateway` command and the local mode both
// start the front door through it, so both run the same wiring.
package frontdoor
