// Package orchestrator is the node control plane: it accepts the node
// agents' sockets on WSS /v1/nodes/connect, keeps the node registry in
// Redis, and routes every admitted chat completion to a node with free KV
// cache. Several replicas run side by side; any replica can route to any
// node.
//
// # Connections
//
// A node's first frame is register. The replica checks the node's token
// against its stored hash before it counts anything (a bad or revoked
// token gets error and close 1008; a token refused moments ago is refused
// from memory; past 20 bad ones in 10 s from one address, that address's
// bad ones get retry_after instead, unlogged), so a valid token is never
// refused for its address, which nodes behind one NAT share. Then the
// node's own allowance (registry.AllowNodeRegistration: 10 a minute, so a
// node registering in a loop cannot spend the cluster's rate), then the
// location: a node token registers an on-prem node only, and a register
// that claims a cloud location or a service URL gets error 403 and close
// 1008 — cloud nodes, reached over HTTP, come from the cluster or the
// configuration, never from a node. Then the cluster-wide registration
// rate (registry.AllowRegistration; the excess gets retry_after and close
// 1013). It records the registration in PostgreSQL (nodes, node_events),
// claims node:{id} in Redis under a new epoch and answers welcome. Every
// text frame a node sends is made valid UTF-8 as it is read (invalid bytes
// become U+FFFD), since its strings reach clients. From then on,
// after the HTTP handler has returned, one goroutine reads the socket, one
// writes it (every write has a deadline, a full write queue drops the
// link) and pings it, and one checks the node's token again every
// TokenRecheckInterval, apart from the writer so that a slow database
// never holds the node's frames; a revoked token closes the socket with
// 1008. Every time the replica reads and every timer of its own logic
// runs on Config.Clock (k8s.io/utils/clock), which tests fake, and so do
// the dates of its node events (NewEvents) and the health Control.Live
// reports (NewControl takes the same clock); socket deadlines are the
// network's and stay real. Each heartbeat refreshes
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
// the request over HTTP instead; an engine's refusal reaches the client as
// its status and a body of our own, its words only the replica's log.
//
// A node's done frame is kept in Redis for the ledger sweeper only if the
// request was assigned to that node: the owner notes each assignment
// (done:{id}:nodes) ahead of the assign frame, in the queue that records
// dones, and a done that does not find its request running on the socket
// (cancelled, replayed after a reconnect, or forged) is checked against
// that note.
//
// Dispatch returns the stream only once the first event (or a refusal) is
// in hand, so a request that has streamed nothing can still fail with an
// HTTP status, and the retry rule is simple: a request whose node is lost,
// unreachable or draining before its first event is retried once on
// another node — among them those of a node silent for two heartbeat
// intervals (docs/requirements.md: a node leaves routing after 2 missed heartbeats). A stream that breaks after its first event ends with an
// error event and dispatch.ErrStreamBroken, never a hang: the owner fails
// every request of a socket that drops, and a requesting replica fails its
// forwarded requests when their node's record expires or changes epoch.
//
// Each request has a window of chunk credit (nodeproto.DefaultWindow): the
// node sends at most that many chunks beyond what the consumer has read,
// and the consumer grants more with window frames as it reads, so a slow
// client holds back only its own stream and buffers stay bounded.
//
// # Models at zero
//
// Each refresh also publishes to the shared wake record (package
// coldstart), for every declared model and every model a node serves,
// whether a ready node serves it: one that is healthy and, for a node
// agent, has beaten since it registered (a node registered but not yet
// beaten is Unsure); with the load time its Service announces
// (ExpectedLoads), else coldstart.DefaultExpectedLoad. A replica says
// nothing of zero in its first 15 s, before it has read its cloud nodes.
// The pending gauge adds the callers the gateways refused at zero, until
// a ready node serves the model or their hold passes, so the autoscaler's
// wake signal stays up while the replica loads.
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
