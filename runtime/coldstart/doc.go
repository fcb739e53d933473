// Package coldstart is the shared record of models woken from zero.
//
// A model at zero (declared, no ready replica or node) cannot answer for
// minutes: a node must be launched, the weights synced and loaded. Rather
// than hold its callers in the gateways' queue past their limit, the
// gateway answers each at once with 503 and a Retry-After of the expected
// load time less the time the wake has already run, and records the
// caller here as demand.
//
// The orchestrator replicas publish, every refresh, whether each model has
// a ready replica and how long a load from zero is expected to take
// (Publish); a model is at zero when no replica has published it ready
// within StateTTL, and at least one has published it. A refused caller's
// demand is held (Held, which the pending gauge adds) until a replica
// publishes the model ready, or until the hold passes: the load time plus
// HoldMargin, at most MaxHold. So the wake signal stays up while the
// replica loads, and a caller that comes back at its Retry-After finds it.
//
// Every key of a model carries the model in a Redis Cluster hash tag, so
// one script touches them all; each step is one script, atomic on the
// server. Time comes from the Board's clock, never the server's, so tests
// drive it.
package coldstart
