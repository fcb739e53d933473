// Package nodeagent is the dial-out agent that runs beside an engine (vLLM
// or the simulator) and connects it to the orchestrator over the node
// protocol of package nodeproto.
//
// The agent dials the server, sends register as its first frame and waits
// for welcome. It then serves the connection: one read loop, one writer
// goroutine that owns every write, a heartbeat built from the engine's
// Prometheus metrics every welcome interval, and one goroutine per assigned
// request that streams the engine's events back as chunk frames and ends
// with done or error. A cancel closes the request's engine stream, which is
// how vLLM aborts. A drain refuses new work, lets in-flight requests finish
// and then ends Run. When the link drops the agent reconnects with
// nodeproto.Backoff, honouring the server's retry_after and reconnect
// advice, until its context ends.
//
// Not yet done: per-request window credit, ack and replay of done records,
// and load_model (answered with a connection error 501).
package nodeagent
