package quota

import "time"

// Keys builds every Redis key and channel name of the package from one
// prefix. The variable part is wrapped in braces, a Redis Cluster hash tag,
// so all keys a script touches share a slot.
type Keys struct {
	prefix string
}

// NewKeys returns the key builder for prefix.
func NewKeys(prefix string) Keys {
	return Keys{prefix: prefix}
}

// Streams is the sorted set of a key's stream slots: request id → deadline
// in Unix milliseconds.
func (k Keys) Streams(keyID string) string {
	return k.prefix + "streams:{" + keyID + "}"
}

// RPM is the sorted set of a key's requests in the last minute.
func (k Keys) RPM(keyID string) string {
	return k.prefix + "rl:{" + keyID + "}:rpm"
}

// TokensPerDay is the counter of a key's tokens on the UTC day of t.
func (k Keys) TokensPerDay(keyID string, t time.Time) string {
	return k.prefix + "tpd:{" + keyID + "}:" + t.UTC().Format("20060102")
}

// TokensCounted marks a request whose tokens were counted on its key's
// day, so that a second settle of it counts nothing.
func (k Keys) TokensCounted(keyID, requestID string) string {
	return k.prefix + "tpd:{" + keyID + "}:counted:" + requestID
}

// Queue is the sorted set of a model's waiting requests, scored by arrival
// order.
func (k Keys) Queue(model string) string {
	return k.prefix + "q:{" + model + "}"
}

// QueueSeq is the counter that numbers a model's queue entries.
func (k Keys) QueueSeq(model string) string {
	return k.prefix + "q:{" + model + "}:seq"
}

// QueueMissed marks a wake-up that came while a model's head had stepped
// out of its queue to try: coming back, it tries again at once instead of
// sleeping a poll interval on a wake-up nobody heard.
func (k Keys) QueueMissed(model string) string {
	return k.prefix + "q:{" + model + "}:missed"
}

// notifyKeys are the keys notifyScript touches for model.
func (k Keys) notifyKeys(model string) []string {
	return []string{k.Queue(model), k.QueueSeq(model), k.QueueMissed(model)}
}

// QueueWake is the pub/sub channel that wakes a model's waiters; each
// message carries the request id of the queue's head.
func (k Keys) QueueWake(model string) string {
	return k.prefix + "q:{" + model + "}:wake"
}
