// Package devmode wires the whole platform into one process for `make run`:
// simulated engines for the seed's three models, the embedded SQLite store,
// an in-process Redis-protocol server and the gateway, all on loopback, with
// a team and an API key printed ready for curl and the OpenAI SDKs. The
// production components run unchanged; only the stores are embedded.
package devmode
