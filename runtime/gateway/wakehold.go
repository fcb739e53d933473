package gateway

import (
	"context"
	"k8s.io/utils/clock"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// DefaultWakeHold is how long a caller of a model at zero is held
	// before its 503: the OpenAI SDKs (Python and Node) time a request out
	// after 10 minutes without a response and retry it twice, and retry a
	// 503 twice at once (they ignore a Retry-After past a minute), so a
	// hold of 8 minutes leaves each attempt 2 minutes for its queue and
	// first token, and an SDK's three attempts wait about 24 minutes:
	// past the largest model's cold start (the 70B's 1,116 s).
	DefaultWakeHold = 8 * time.Minute
	// DefaultWakeHoldBudget bounds the memory the held callers keep, as
	// their bodies' weight (bodyWeight per byte) and holdOverhead each: 64
	// MiB is thousands of ordinary held requests, a small part of a
	// gateway's memory. A caller past it is answered at once, as without
	// the hold.
	DefaultWakeHoldBudget = 64 << 20
	// holdOverhead is what a held request costs besides its body: its
	// handler's goroutine and stack, its connection's buffers.
	holdOverhead = 16 << 10
	// wakePoll is how often a model's watch asks the cold-start record
	// whether the model is still at zero: the orchestrators refresh it
	// every second.
	wakePoll = time.Second
)

// holdEnd is why a hold ended.
type holdEnd int

const (
	// holdReady: the model is no longer at zero (or the record cannot be
	// read, and the request takes the queue, as without the record).
	holdReady holdEnd = iota
	// holdTimedOut: the hold passed with the model still at zero.
	holdTimedOut
	// holdStopping: the gateway began to shut down.
	holdStopping
	// holdGone: the client went away.
	holdGone
)

func (e holdEnd) String() string {
	switch e {
	case holdReady:
		return "ready"
	case holdTimedOut:
		return "timed_out"
	case holdStopping:
		return "stopping"
	default:
		return "gone"
	}
}

// wakeHolds holds the callers of models at zero until a replica is
// ready, one watch per model however many callers wait: the watch asks
// the cold-start record every wakePoll and releases every waiter at once.
// A watch runs only while its model has waiters.
type wakeHolds struct {
	board  ColdStarts
	clock  clock.WithTicker
	poll   time.Duration
	rtime  time.Duration // each Redis call's timeout
	budget int64
	used   atomic.Int64
	mu     sync.Mutex
	models map[string]*wakeWatch
}

// wakeWatch is one model's watch: ready closes when the model leaves
// zero; cancel stops the watch once its last waiter left.
type wakeWatch struct {
	ready   chan struct{}
	waiters int
	cancel  context.CancelFunc
}

func newWakeHolds(board ColdStarts, budget int64, redisTimeout time.Duration, clk clock.WithTicker) *wakeHolds {
	return &wakeHolds{board: board, clock: clk, poll: wakePoll, rtime: redisTimeout, budget: budget, models: map[string]*wakeWatch{}}
}

// take reserves weight w of the hold budget; false means there is no room.
func (h *wakeHolds) take(w int64) bool {
	if h.used.Add(w) > h.budget {
		h.used.Add(-w)
		return false
	}
	return true
}

// wait holds the caller of model until the model leaves zero, hold
// passes, stop closes or ctx ends, and reports which came first.
func (h *wakeHolds) wait(ctx context.Context, model string, hold time.Duration, stop <-chan struct{}) holdEnd {
	w := h.join(model)
	defer h.leave(model, w)
	t := h.clock.NewTimer(hold)
	defer t.Stop()
	select {
	case <-w.ready:
		return holdReady
	case <-t.C():
		return holdTimedOut
	case <-stop:
		return holdStopping
	case <-ctx.Done():
		return holdGone
	}
}

// join adds a waiter to model's watch, starting the watch if it is the
// first.
func (h *wakeHolds) join(model string) *wakeWatch {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.models[model]
	if w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w = &wakeWatch{ready: make(chan struct{}), cancel: cancel}
		h.models[model] = w
		go h.watch(ctx, model, w)
	}
	w.waiters++
	return w
}

// leave removes a waiter; the last one stops the watch.
func (h *wakeHolds) leave(model string, w *wakeWatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.waiters--
	if w.waiters == 0 {
		w.cancel()
		if h.models[model] == w {
			delete(h.models, model)
		}
	}
}

// watch asks the record every poll until model leaves zero or the
// record cannot be read, then releases the waiters; it ends with ctx
// (its last waiter gone).
func (h *wakeHolds) watch(ctx context.Context, model string, w *wakeWatch) {
	t := h.clock.NewTicker(h.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		rctx, cancel := context.WithTimeout(ctx, h.rtime)
		zero, err := h.board.AtZero(rctx, model)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil || !zero {
			h.mu.Lock()
			if h.models[model] == w {
				delete(h.models, model) // later callers start a watch of their own
			}
			h.mu.Unlock()
			close(w.ready)
			return
		}
	}
}
