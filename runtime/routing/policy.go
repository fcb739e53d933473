package routing

import (
	"fmt"
	"math"
	"sync/atomic"
)

// Candidate is what the router knows of one node serving the model.
type Candidate struct {
	NodeID string
	// Local means this replica holds the node's socket.
	Local bool
	// MaxNumSeqs is the engine's --max-num-seqs; 0 means unknown.
	MaxNumSeqs int
	// KVCapacityTokens is how many tokens the engine's KV cache holds; 0
	// means unknown.
	KVCapacityTokens int64
	// KVCacheUsage, QueueDepth and Running are the last heartbeat's.
	KVCacheUsage float64
	QueueDepth   int
	Running      int
	// InFlight and InFlightTokens are this replica's requests on the node
	// now and the sum of their needs; PendingTokens is the part of that sum
	// assigned since the node's last heartbeat, and ReleasedTokens the needs
	// of requests assigned before it that have finished since, which the
	// heartbeat still counts. Tracker.Fill sets them.
	InFlight       int
	InFlightTokens int64
	PendingTokens  int64
	ReleasedTokens int64
}

// Policy chooses a node.
type Policy interface {
	// Name is the policy's name, as New takes it.
	Name() string
	// Pick returns the index in cands of the node for a request needing
	// need tokens (prompt estimate plus output cap), or -1 when none can
	// take it now and the request should wait.
	Pick(cands []Candidate, need int64) int
}

// Policy names.
const (
	KVAware      = "kv-aware"
	RoundRobin   = "round-robin"
	LeastRequest = "least-request"
	// Default is the policy of the orchestrator.
	Default = KVAware
)

// localPreference is how close to the best score a node with a local
// socket must be to win: within 10 %.
const localPreference = 0.10

// New returns the policy called name.
func New(name string) (Policy, error) {
	switch name {
	case KVAware:
		return kvAware{}, nil
	case RoundRobin:
		return &roundRobin{}, nil
	case LeastRequest:
		return leastRequest{}, nil
	}
	return nil, fmt.Errorf("routing: unknown policy %q (one of %v)", name, Names())
}

// Names lists the policies New knows.
func Names() []string { return []string{KVAware, RoundRobin, LeastRequest} }

// full reports whether the node runs as many requests as it may.
func (c *Candidate) full() bool {
	return c.MaxNumSeqs > 0 && max(c.InFlight, c.Running) >= c.MaxNumSeqs
}

// idle reports whether nothing runs, waits or is in flight on the node.
func (c *Candidate) idle() bool {
	return c.InFlight == 0 && c.Running == 0 && c.QueueDepth == 0
}

// BlockTokens is the KV cache's block size in tokens: vLLM's default
// --block-size on GPUs. An engine allocates a sequence's KV in whole
// blocks, so a sequence of n tokens holds Footprint(n).
const BlockTokens = 16

// Footprint is the KV cache a sequence of n tokens holds: n rounded up to
// whole blocks. A need counted in bare tokens lets a full batch overrun
// the cache by up to a block a sequence, and the engine then preempts.
func Footprint(n int64) int64 {
	return (n + BlockTokens - 1) / BlockTokens * BlockTokens
}

// FreeKV is the node's free KV cache for a request of need tokens, as
// the package doc defines it; +Inf when the capacity is unknown.
func (c *Candidate) FreeKV(need int64) float64 {
	if c.KVCapacityTokens <= 0 {
		return math.Inf(1)
	}
	capacity := float64(c.KVCapacityTokens)
	observed := c.KVCacheUsage*capacity + float64(c.QueueDepth)*float64(need) +
		float64(c.PendingTokens) - float64(c.ReleasedTokens)
	return capacity - max(float64(c.InFlightTokens), observed)
}

// load orders nodes by requests: this replica's in flight, else the
// engine's own count, plus its queue.
func (c *Candidate) load() int { return max(c.InFlight, c.Running) + c.QueueDepth }

// kvAware picks the node with the most free KV cache that fits.
type kvAware struct{}

func (kvAware) Name() string { return KVAware }

func (kvAware) Pick(cands []Candidate, need int64) int {
	best, bestFree := -1, math.Inf(-1)
	for i := range cands {
		c := &cands[i]
		free := c.FreeKV(need)
		if c.full() || free < float64(need) {
			continue
		}
		if better(free, c, bestFree, cands, best) {
			best, bestFree = i, free
		}
	}
	if best < 0 {
		return firstIdle(cands)
	}
	if cands[best].Local {
		return best
	}
	local, localFree := -1, math.Inf(-1)
	for i := range cands {
		c := &cands[i]
		free := c.FreeKV(need)
		if !c.Local || c.full() || free < float64(need) || free < bestFree*(1-localPreference) {
			continue
		}
		if better(free, c, localFree, cands, local) {
			local, localFree = i, free
		}
	}
	if local >= 0 {
		return local
	}
	return best
}

// better reports whether candidate c with free KV beats the best so far:
// more free KV (an unknown capacity counts as infinite, then the lighter
// load wins), then the lower node id.
func better(free float64, c *Candidate, bestFree float64, cands []Candidate, best int) bool {
	if best < 0 {
		return true
	}
	b := &cands[best]
	switch {
	case free != bestFree:
		return free > bestFree
	case c.load() != b.load():
		return c.load() < b.load()
	default:
		return c.NodeID < b.NodeID
	}
}

// firstIdle returns the idle node with the lowest id, or -1.
func firstIdle(cands []Candidate) int {
	pick := -1
	for i := range cands {
		if cands[i].idle() && (pick < 0 || cands[i].NodeID < cands[pick].NodeID) {
			pick = i
		}
	}
	return pick
}

// roundRobin rotates over the candidates, skipping full ones.
type roundRobin struct{ next atomic.Uint64 }

func (*roundRobin) Name() string { return RoundRobin }

func (r *roundRobin) Pick(cands []Candidate, _ int64) int {
	if len(cands) == 0 {
		return -1
	}
	start := int(r.next.Add(1)-1) % len(cands)
	for k := range cands {
		i := (start + k) % len(cands)
		if !cands[i].full() {
			return i
		}
	}
	return -1
}

// leastRequest picks the fewest requests in flight, then the shortest
// engine queue, then the lower node id; it skips full nodes.
type leastRequest struct{}

func (leastRequest) Name() string { return LeastRequest }

func (leastRequest) Pick(cands []Candidate, _ int64) int {
	best := -1
	for i := range cands {
		c := &cands[i]
		if c.full() {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &cands[best]
		switch {
		case c.InFlight != b.InFlight:
			if c.InFlight < b.InFlight {
				best = i
			}
		case c.QueueDepth+c.Running != b.QueueDepth+b.Running:
			if c.QueueDepth+c.Running < b.QueueDepth+b.Running {
				best = i
			}
		case c.NodeID < b.NodeID:
			best = i
		}
	}
	return best
}
