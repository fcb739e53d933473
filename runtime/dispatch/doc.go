// Package dispatch is the seam between the gateway and whatever runs a
// request on an engine. The gateway admits a request, then hands a Job to a
// Dispatcher and relays the Stream it gets back. Direct (this package) sends
// the job straight to an engine's URL; the orchestrator implements the same
// interface by routing to nodes, in-process in the local mode and over
// internal HTTP when gateway and orchestrator run apart.
//
// ParseEvent is the one reader of an engine's events, on every path: it
// reads what an event's JSON means, never how it is spelled, so an engine
// that spaces, indents or orders its JSON otherwise than vLLM is counted
// and billed alike. It also counts the text each event carries
// (Event.Text) with the stand-in tokenizer: the platform's own measure of
// what it relayed, by which the gateway judges an engine's usage
// (ledger.BoundUsage); so dispatch sits above package tokens in the
// import layers. An engine stream hands on each event as valid UTF-8:
// AppendValidUTF8 is the rule, the node agent's too.
package dispatch
