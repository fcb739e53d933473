// Package dispatch is the seam between the gateway and whatever runs a
// request on an engine. The gateway admits a request, then hands a Job to a
// Dispatcher and relays the Stream it gets back. Direct (this package) sends
// the job straight to an engine's URL; the orchestrator implements the same
// interface by routing to nodes, in-process in the local mode and over
// internal HTTP when gateway and orchestrator run apart.
package dispatch
