package gateway

import (
	"context"
	"fmt"
	"k8s.io/utils/clock"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// fakeBoard is a cold-start record whose models are at zero until told.
type fakeBoard struct {
	mu    sync.Mutex
	ready map[string]bool
	reads atomic.Int64
}

func (b *fakeBoard) AtZero(_ context.Context, model string) (bool, error) {
	b.reads.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.ready[model], nil
}

func (b *fakeBoard) Refuse(ctx context.Context, model, _ string) (time.Duration, bool, error) {
	zero, err := b.AtZero(ctx, model)
	return time.Minute, zero, err
}

func (b *fakeBoard) wake(model string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ready[model] = true
}

// TestWakeWatchIsOnePerModel: however many callers a model holds, one
// watch asks the record for it and releases them all at once; a model's
// watch ends with its last waiter, whether the waiters left, were stopped
// or were released (the leak check at the package's end sees any watch
// still running).
func TestWakeWatchIsOnePerModel(t *testing.T) {
	board := &fakeBoard{ready: map[string]bool{}}
	h := newWakeHolds(board, 1<<20, time.Second, clock.RealClock{})
	h.poll = 5 * time.Millisecond
	watches := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.models)
	}
	const waiters = 20
	stop := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	ends := map[string]chan holdEnd{"woken": make(chan holdEnd, waiters), "stopped": make(chan holdEnd, 1), "left": make(chan holdEnd, 1)}
	for range waiters {
		go func() { ends["woken"] <- h.wait(context.Background(), "woken", time.Hour, nil) }()
	}
	go func() { ends["stopped"] <- h.wait(context.Background(), "stopped", time.Hour, stop) }()
	go func() { ends["left"] <- h.wait(ctx, "left", time.Hour, nil) }()
	testenv.EventuallyNil(t, time.Minute, "three models watched", func() error {
		if n := watches(); n != 3 {
			return fmt.Errorf("%d watches", n)
		}
		return nil
	})
	before := board.reads.Load()
	testenv.EventuallyNil(t, time.Minute, "the watches asking", func() error {
		if board.reads.Load() < before+9 {
			return fmt.Errorf("%d reads", board.reads.Load()-before)
		}
		return nil
	})
	board.wake("woken")
	for range waiters {
		if e := <-ends["woken"]; e != holdReady {
			t.Errorf("a caller of the woken model: %v, want ready", e)
		}
	}
	close(stop)
	if e := <-ends["stopped"]; e != holdStopping {
		t.Errorf("a caller at shutdown: %v, want stopping", e)
	}
	cancel()
	if e := <-ends["left"]; e != holdGone {
		t.Errorf("a caller that left: %v, want gone", e)
	}
	if n := watches(); n != 0 {
		t.Errorf("%d watches left with no waiter", n)
	}
	if e := h.wait(context.Background(), "stopped", time.Millisecond, nil); e != holdTimedOut {
		t.Errorf("a hold that passed: %v, want timed_out", e)
	}
}
