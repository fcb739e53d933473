package nodeagent

import (
	"context"
	"math"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// credit is one request's chunk allowance on its connection: it starts at
// welcome's window, the request's goroutine takes one per chunk frame, and
// the read loop adds the server's window grants. At zero the goroutine
// waits, and so stops reading its engine stream, while every other request
// and the connection go on.
type credit struct {
	mu sync.Mutex
	n  int
	// more wakes a waiting taker after a grant; size 1 so a grant never
	// blocks the read loop and grants made while nobody waits coalesce.
	more chan struct{}
}

func newCredit(n int) *credit {
	return &credit{n: n, more: make(chan struct{}, 1)}
}

// grant adds k chunks, saturating rather than overflowing on a server
// that grants absurdly much.
func (c *credit) grant(k int) {
	c.mu.Lock()
	if k > math.MaxInt-c.n {
		c.n = math.MaxInt
	} else {
		c.n += k
	}
	c.mu.Unlock()
	select {
	case c.more <- struct{}{}:
	default:
	}
}

// take spends one chunk, waiting for a grant while there is none. It
// reports false when ctx ends first, or when no grant came for stall: the
// server stopped granting (its consumer or the replica relaying to it is
// gone), and a request left waiting would hold its engine slot forever.
func (c *credit) take(ctx context.Context, clk clock.Clock, stall time.Duration) (ok, stalled bool) {
	var timeout <-chan time.Time
	for {
		c.mu.Lock()
		if c.n > 0 {
			c.n--
			c.mu.Unlock()
			return true, false
		}
		c.mu.Unlock()
		if timeout == nil {
			t := clk.NewTimer(stall)
			defer t.Stop()
			timeout = t.C()
		}
		select {
		case <-c.more:
		case <-ctx.Done():
			return false, false
		case <-timeout:
			return false, true
		}
	}
}
