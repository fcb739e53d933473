package routing

import (
	"sync"
	"time"
)

// releasedRetention is how long a finished request is remembered: longer
// than a heartbeat can be old (10 s before a node leaves routing).
const releasedRetention = 15 * time.Second

// Tracker counts one replica's requests in flight per node and the tokens
// they need, and remembers for a while the ones that finished, whose
// tokens a heartbeat taken before they finished still counts. It is safe
// for concurrent use.
type Tracker struct {
	mu       sync.Mutex
	nodes    map[string]map[uint64]assignment
	released map[string][]assignment
	next     uint64
	now      func() time.Time
}

// assignment is one request on a node: assigned at at, finished at done.
type assignment struct {
	tokens int64
	at     time.Time
	done   time.Time
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return NewTrackerWithClock(time.Now) }

// NewTrackerWithClock returns an empty tracker that dates releases with now.
func NewTrackerWithClock(now func() time.Time) *Tracker {
	return &Tracker{nodes: map[string]map[uint64]assignment{}, released: map[string][]assignment{}, now: now}
}

// Assign counts a request of tokens sent to the node at at, until the
// returned release runs (more than once is harmless).
func (t *Tracker) Assign(nodeID string, tokens int64, at time.Time) (release func()) {
	t.mu.Lock()
	t.next++
	id := t.next
	if t.nodes[nodeID] == nil {
		t.nodes[nodeID] = map[uint64]assignment{}
	}
	t.nodes[nodeID][id] = assignment{tokens: tokens, at: at}
	t.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			a := t.nodes[nodeID][id]
			delete(t.nodes[nodeID], id)
			if len(t.nodes[nodeID]) == 0 {
				delete(t.nodes, nodeID)
			}
			a.done = t.now()
			t.released[nodeID] = append(prune(t.released[nodeID], a.done), a)
		})
	}
}

// Fill sets c's InFlight, InFlightTokens, PendingTokens (the requests
// assigned after lastBeat, the node's last heartbeat) and ReleasedTokens
// (those assigned before it that have finished since).
func (t *Tracker) Fill(c *Candidate, lastBeat time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.InFlight, c.InFlightTokens, c.PendingTokens, c.ReleasedTokens = 0, 0, 0, 0
	for _, a := range t.nodes[c.NodeID] {
		c.InFlight++
		c.InFlightTokens += a.tokens
		if a.at.After(lastBeat) {
			c.PendingTokens += a.tokens
		}
	}
	rel := prune(t.released[c.NodeID], t.now())
	if len(rel) == 0 {
		delete(t.released, c.NodeID)
	} else {
		t.released[c.NodeID] = rel
	}
	for _, a := range rel {
		if !a.at.After(lastBeat) && a.done.After(lastBeat) {
			c.ReleasedTokens += a.tokens
		}
	}
}

// prune drops the releases older than releasedRetention at now; rel is in
// release order.
func prune(rel []assignment, now time.Time) []assignment {
	i := 0
	for i < len(rel) && now.Sub(rel[i].done) > releasedRetention {
		i++
	}
	return rel[i:]
}
