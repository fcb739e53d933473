package registry

import "strconv"

// Keys builds every Redis key and pub/sub channel name of the registry from
// one prefix. The variable part is wrapped in braces, a Redis Cluster hash
// tag, so a node's record, epoch counter and tombstone share a slot and one
// script can change them together.
type Keys struct {
	prefix string
}

// NewKeys returns the key builder for prefix.
func NewKeys(prefix string) Keys {
	return Keys{prefix: prefix}
}

// Node is the hash holding a node's record; it expires with the TTL.
func (k Keys) Node(nodeID string) string {
	return k.prefix + "node:{" + nodeID + "}"
}

// Epoch is the counter of a node's registrations; its value is the epoch of
// the latest one. It outlives the record (see epochRetention).
func (k Keys) Epoch(nodeID string) string {
	return k.prefix + "node:{" + nodeID + "}:epoch"
}

// Left is the tombstone Deregister leaves: the epoch that left on purpose,
// so Watch does not report it as a death.
func (k Keys) Left(nodeID string) string {
	return k.prefix + "node:{" + nodeID + "}:left"
}

// Live is the sorted set of registered node ids scored by the Redis time of
// their last beat (Unix milliseconds); an index checked against the
// records, never the truth.
func (k Keys) Live() string {
	return k.prefix + "nodes:live"
}

// Registrations is the counter of registration attempts in one second of
// the Redis server's clock.
func (k Keys) Registrations(unixSecond int64) string {
	return k.prefix + "reg:{" + strconv.FormatInt(unixSecond, 10) + "}"
}

// NodeRegistrations counts a node's admitted registrations in its
// current window (AllowNodeRegistration).
func (k Keys) NodeRegistrations(nodeID string) string {
	return k.prefix + "node:{" + nodeID + "}:regs"
}

// NodeChannel is the pub/sub channel on which any replica sends the
// replica that owns a node's socket the frames for that node (assign,
// cancel, window).
func (k Keys) NodeChannel(nodeID string) string {
	return k.prefix + "node:{" + nodeID + "}:in"
}

// ReplicaChannel is the pub/sub channel on which an orchestrator replica
// receives the frames of the requests it forwarded to nodes whose sockets
// other replicas own: one subscription per replica, instead of one per
// request.
func (k Keys) ReplicaChannel(replicaID string) string {
	return k.prefix + "orch:{" + replicaID + "}:replies"
}

// Completion is the key under which the replica that received a request's
// done frame keeps its token counts for the ledger sweeper (a string of
// JSON, with a TTL).
func (k Keys) Completion(requestID string) string {
	return k.prefix + "done:{" + requestID + "}"
}

// CompletionNodes is the set of the nodes a request was assigned to (a
// first attempt and its retry): only their done frames are recorded under
// Completion. It shares Completion's hash tag, and so its slot.
func (k Keys) CompletionNodes(requestID string) string {
	return k.prefix + "done:{" + requestID + "}:nodes"
}

// CloudDrain marks a cloud node (an engine reached through its Service,
// which has no record here) as draining: no replica assigns it new work.
func (k Keys) CloudDrain(nodeID string) string {
	return k.prefix + "cloud:{" + nodeID + "}:drain"
}
