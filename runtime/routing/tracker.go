package routing

import (
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"
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
	released map[string]*releases
	next     uint64
	clock    clock.PassiveClock
}

// releases are a node's finished requests in the order they finished, and
// the sum Fill last computed over them. A node's heartbeat changes every few
// seconds while requests finish by the thousand: Fill adds what finished
// since its last call instead of reading them all again.
type releases struct {
	list    []assignment
	dropped int // entries pruned from list's front so far

	beat time.Time // the heartbeat sum is for
	sum  int64     // tokens of those assigned by beat and finished after it
	upto int       // entries (counting the dropped) sum has seen
}

// assignment is one request on a node: assigned at at, finished at done.
type assignment struct {
	tokens int64
	at     time.Time
	done   time.Time
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return NewTrackerWithClock(clock.RealClock{}) }

// NewTrackerWithClock returns an empty tracker that dates releases with clk.
func NewTrackerWithClock(clk clock.PassiveClock) *Tracker {
	return &Tracker{nodes: map[string]map[uint64]assignment{}, released: map[string]*releases{}, clock: clk}
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
			a.done = t.clock.Now()
			r := t.released[nodeID]
			if r == nil {
				r = &releases{}
				t.released[nodeID] = r
			}
			r.prune(a.done)
			r.list = append(r.list, a)
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
	r := t.released[c.NodeID]
	if r == nil {
		return
	}
	r.prune(t.clock.Now())
	if len(r.list) == 0 {
		delete(t.released, c.NodeID)
		return
	}
	c.ReleasedTokens = r.releasedSince(lastBeat)
}

// releasedSince is the tokens of the requests assigned by beat that
// finished after it. For the heartbeat of the last call it adds only what
// finished since; a new heartbeat starts from the first request that
// finished after it (list is in finishing order). The sum is always the
// one over list: prune takes out of it what it drops.
func (r *releases) releasedSince(beat time.Time) int64 {
	from := r.upto - r.dropped
	if !beat.Equal(r.beat) || from < 0 {
		r.beat, r.sum = beat, 0
		from = sort.Search(len(r.list), func(i int) bool { return r.list[i].done.After(beat) })
	}
	for _, a := range r.list[from:] {
		if !a.at.After(beat) && a.done.After(beat) {
			r.sum += a.tokens
		}
	}
	r.upto = r.dropped + len(r.list)
	return r.sum
}

// prune drops the releases older than releasedRetention at now.
func (r *releases) prune(now time.Time) {
	i := 0
	for i < len(r.list) && now.Sub(r.list[i].done) > releasedRetention {
		i++
	}
	for j, a := range r.list[:i] {
		// Exact even for a heartbeat older than the retention.
		if r.dropped+j < r.upto && !a.at.After(r.beat) && a.done.After(r.beat) {
			r.sum -= a.tokens
		}
	}
	if i > 0 {
		r.list = r.list[i:]
		r.dropped += i
	}
}
