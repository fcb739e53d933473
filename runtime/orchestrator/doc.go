// Package orchestrator is the node control plane: it accepts the node
// agents' sockets on WSS /v1/nodes/connect, keeps the node registry in
// Redis, and routes every admitted chat completion to a node with free KV
// cache. Several replicas run side by side; any replica can route to any
// node.
//
// # Connections
//
// A node's first frame is register. The replica checks the node's token
// against its stored hash (a bad or revoked token gets error and close
// 1008; a token refused moments ago is refused from memory, and an address
// that sent 20 bad ones in 10 s gets retry_after before any lookup), then
// the cluster-wide registration rate (registry.AllowRegistration; the
// excess gets retry_after and close 1013), so junk cannot spend the rate.
// It records the registration in PostgreSQL (nodes, node_events), claims
// node:{id} in Redis under a new epoch and answers welcome. From then on,
// after the HTTP handler has returned, one goroutine reads the socket and
// one writes it (every write has a deadline, a full write queue drops the
// link) and pings it. Each heartbeat refreshes
// the record with a compare-and-set on the epoch; a superseded connection
// (the node registered again, here or at another replica) takes no new
// work, finishes its requests and closes with 4000.
//
// # Requests
//
// Dispatch picks a node with the routing policy (package routing) among the
// healthy nodes serving the model in a snapshot of the registry refreshed
// every RefreshInterval, corrected by this replica's own count of
// assignments, and sends assign over the node's socket: directly when this
// replica owns it, otherwise as a message on the node's pub/sub channel
// node:{id}:in, which only the owning replica subscribes to. The owner
// relays the request's chunk, done and error frames back, in order, on the
// requesting replica's reply channel. Cloud nodes with a service URL get
// the request over HTTP instead.
//
// Dispatch returns the stream only once the first event (or a refusal) is
// in hand, so a request that has streamed nothing can still fail with an
// HTTP status, and the retry rule is simple: a request whose node is lost,
// unreachable or draining before its first event is retried once on
// another node — among them those of a node silent for two heartbeat
// intervals (the seed's "remove the node after 2 missed heartbeats"). A stream that breaks after its first event ends with an
// error event and dispatch.ErrStreamBroken, never a hang: the owner fails
// every request of a socket that drops, and a requesting replica fails its
// forwarded requests when their node's record expires or changes epoch.
//
// Each request has a window of chunk credit (nodeproto.DefaultWindow): the
// node sends at most that many chunks beyond what the consumer has read,
// and the consumer grants more with window frames as it reads, so a slow
// client holds back only its own stream and buffers stay bounded.
//
// # Control
//
// Control drains nodes, revokes their sockets and reports their live state
// for the admin API. It needs only Redis and the database, so a gateway
// process that does not run the orchestrator can serve those endpoints: a
// drain is written to the record and the database and sent to the owning
// replica on the node's channel; a revocation is sent the same way and the
// owner closes the socket with 1008.
package orchestrator
