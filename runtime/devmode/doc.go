// Package devmode wires the whole platform into one process for `make run`:
// simulated engines for the reference workload's three models, the embedded SQLite store,
// an in-process Redis-protocol server and the gateway, all on loopback, with
// a team and an API key printed ready for curl and the OpenAI SDKs. The
// production components run unchanged; only the stores are embedded.
//
// With a data dir, a restart resumes: the secrets the local mode minted
// (admin token, API key, node tokens) are kept there, written before the
// store learns their hashes, and reused while the store accepts them; only
// the models that do not exist yet are declared, so a change made through
// the admin API (Terraform) is kept. The node socket's URL is printed with
// the credentials, for node agents added by hand.
//
// Nothing in the local mode starts a node: the callers of a model no ready
// node serves (its nodes drained) are told so at once, with its nodes'
// states and what brings one back, never promised a load from zero.
package devmode
