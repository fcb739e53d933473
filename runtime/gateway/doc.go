// Package gateway is the platform's HTTP front door: the OpenAI-compatible
// API, the admission pipeline in front of it, and the relay that streams an
// engine's answer back to the client. It depends on a dispatch.Dispatcher
// for the engine side and never on the orchestrator's internals.
//
// A caller of a model at zero (no ready replica, as the orchestrators
// publish it in package coldstart) is answered before admission: 503 with
// a Retry-After of the load time left, holding no limit and no ledger row,
// and its demand recorded for the autoscaler.
package gateway
