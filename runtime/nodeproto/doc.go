// Package nodeproto is the wire protocol between a node agent and the
// orchestrator on WSS /v1/nodes/connect: the frame types, their codec, the
// protocol's timing constants and the agent's reconnect backoff.
//
// A node dials out (it may sit behind NAT), and its first frame is
// register, carrying its per-node token, GPUs and models. The server
// answers welcome with the connection's epoch, the heartbeat interval and
// the per-request flow-control window, or retry_after (come back later,
// then close 1013) or a connection error (then close 1008). From then on
// the server sends assign, cancel, window, ack, load_model, drain and
// reconnect; the node sends chunk, done, error and a heartbeat every
// HeartbeatInterval. A request runs assign → (error | chunk* → done); a
// cancel may cross a done and the later of the two is a no-op. The node may
// send at most the granted window of chunk frames per request before the
// server grants more with window, so one slow client never stalls the
// socket. The node keeps each done until an ack names it and replays
// unacknowledged ones after a reconnect, so metering survives a dropped
// link.
//
// Every frame is one JSON text message whose first two members are "v",
// the protocol's major version (Version), and "type". A receiver ignores
// unknown members and unknown types (Decode returns ErrUnknownType), so a
// minor change may add optional fields or frame types without a new
// version. A frame of another major version is refused with ErrVersion and
// the connection closes with 1002; a frame over the receiver's read limit
// is ErrTooLarge (close 1009); malformed JSON (ErrMalformed) or a frame
// that lacks a required field (ErrInvalid) is a protocol error (1002).
// CloseCodeOf maps these errors to WebSocket close codes.
//
// The payloads that pass through the platform travel as raw JSON and are
// never re-encoded: assign's body is the engine's request body and a
// chunk's delta is the engine's server-sent event payload byte for byte,
// including the usage chunk, so the orchestrator relays it without parsing
// it twice. Chunks are the hot path (thousands a second per node), so chunk
// and assign frames are written by hand, and Decode reads a chunk in the
// encoder's canonical member order with a single validating scan of the
// delta, falling back to encoding/json for any other layout. Frames are
// encoded without HTML escaping.
//
// Choices this package makes where the design leaves room: heartbeat's
// kv_cache_usage and gpu_util are absent (nil) when unknown, which is not
// the same as 0; chunk seq starts at 0 for each request and grows by one;
// drain's optional deadline_ms is relative to receipt, so node clocks need
// not agree; cancel, reconnect and retry_after carry an optional free-form
// reason for logs; welcome's optional version is the server's software
// version and register's version the agent's; heartbeat_interval is in
// whole seconds. Node and request ids are 1 to 128 bytes of [A-Za-z0-9._-]
// because they become Redis keys and channel names.
//
// ReconnectSchedule is the agent's reconnect schedule for package backoff:
// full jitter, uniform in [0, min(BackoffCap, BackoffBase·2ⁿ)), reset only
// after a link stayed up for BackoffResetAfter, and overridden by a
// server's retry_after; NewBackoff returns one.
package nodeproto
