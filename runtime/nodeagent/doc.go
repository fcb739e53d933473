// Package nodeagent is the dial-out agent that runs beside an engine (vLLM
// or the simulator) and connects it to the orchestrator over the node
// protocol of package nodeproto.
//
// The agent dials the server, sends register as its first frame and waits
// for welcome. It then serves the connection: one read loop, one writer
// goroutine that owns every write, a heartbeat every welcome interval
// built from the engine's Prometheus metrics (package enginemetrics) and
// the GPUs' utilisation from nvidia-smi when it is on the PATH, and one
// goroutine per assigned request that streams the engine's events back as
// chunk frames and ends with done or error.
//
// Each request may send welcome's window of chunks, plus what the server
// grants with window frames; at zero credit its goroutine stops reading
// its engine stream, so a slow client holds back only its own request.
// A cancel closes the request's engine stream, which is how vLLM aborts,
// and the done that follows says abort with the tokens read so far.
//
// Done records outlive connections: the agent keeps each until an ack
// names it (at most 10,000, the oldest dropped and counted), and every new
// connection writes the unacknowledged ones before any other frame. When
// a link drops, its in-flight requests are cancelled on the engine and
// their abort records wait for the next connection. With
// Config.CompletionLog set, every done is also appended to a local file of
// JSON lines, which ReadCompletionLog reads back for a sweeper; prompts
// and bodies are never written or logged.
//
// A drain refuses new work, lets in-flight requests finish (or cancels
// those still running at its deadline), waits briefly for the last acks
// and then ends Run. When the link drops the agent reconnects with
// nodeproto.NewBackoff's schedule, honouring the server's retry_after and reconnect
// advice, until its context ends.
//
// Not yet done: load_model, which is answered with a connection error 501.
package nodeagent
