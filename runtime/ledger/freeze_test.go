package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// returnsWithin fails the test unless fn returns within d. It does not wait
// for fn beyond d: a call that hangs is the failure, not the test's hang.
func returnsWithin(t *testing.T, what string, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// TestFrozenDatabaseHoldsNoCallerPastItsDeadline: PostgreSQL freezes (its
// proxy holds every byte while connections stay open, as a stopped server
// or a black-holed network looks to a client) while a reservation runs.
// Each caller gets its answer by its own deadline, not a batch's: the one
// whose batch runs learns that its outcome is unknown, the one queued
// behind it that nothing was done; and once the database thaws, cancelling
// the unknown one leaves the books whole.
func TestFrozenDatabaseHoldsNoCallerPastItsDeadline(t *testing.T) {
	dsn := testenv.Postgres(t)
	setup := newFixture(t, dsn)
	team := setup.team(t, "t", 1_000_000)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewFaultProxy(t, u.Host)
	u.Host = proxy.Addr()
	// The same database through the proxy, with its own ledger.
	db, err := store.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{db: db, clock: setup.clock, log: setup.log}
	f.l = f.ledger(t, Config{})
	warm := f.reserve(t, req("warm", team))
	if warm.Microcredits == 0 {
		t.Fatal("no reservation before the freeze")
	}
	proxy.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			proxy.Thaw()
		}
	}()

	const budget = 300 * time.Millisecond
	// The slack covers a loaded machine: the bound this test checks is the
	// caller's, where before a batch held every caller for its own 30 s.
	const slack = 5 * time.Second
	var (
		wg         sync.WaitGroup
		firstErr   error
		queuedErr  error
		settleErr  error
		firstStart = make(chan struct{})
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		close(firstStart)
		returnsWithin(t, "a reservation on a frozen database", budget+slack, func() {
			_, firstErr = f.l.Reserve(ctx, req("first", team))
		})
	}()
	<-firstStart
	// The first call's batch is running (its statement sent, no answer)
	// once the batcher counts it; the next one queues behind it.
	testenv.Eventually(t, "the first batch to start", func() bool { return f.l.reserves.batches.Load() >= 2 })
	wg.Add(2)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		returnsWithin(t, "a queued reservation on a frozen database", budget+slack, func() {
			_, queuedErr = f.l.Reserve(ctx, req("queued", team))
		})
	}()
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		returnsWithin(t, "a settle on a frozen database", budget+slack, func() {
			_, settleErr = f.l.Settle(ctx, "warm", Usage{PromptTokens: 10, CompletionTokens: 5}, SourceExact)
		})
	}()
	wg.Wait()
	if t.Failed() {
		return
	}
	if !errors.Is(firstErr, ErrOutcomeUnknown) {
		t.Errorf("the reservation whose batch ran: %v, want ErrOutcomeUnknown", firstErr)
	}
	if !errors.Is(queuedErr, context.DeadlineExceeded) || errors.Is(queuedErr, ErrOutcomeUnknown) {
		t.Errorf("the reservation queued behind it: %v, want a deadline error with nothing done", queuedErr)
	}
	if !errors.Is(settleErr, context.DeadlineExceeded) || errors.Is(settleErr, ErrOutcomeUnknown) {
		t.Errorf("the settle queued behind it: %v, want a deadline error with nothing done", settleErr)
	}

	proxy.Thaw()
	thawed = true
	// The gateway cancels a reservation whose outcome is unknown; the
	// queued ones were never made.
	if _, err := f.l.Cancel(context.Background(), "first"); err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel after the thaw: %v", err)
	}
	if _, err := f.l.Cancel(context.Background(), "warm"); err != nil {
		t.Fatalf("cancel after the thaw: %v", err)
	}
	var n int
	if err := setup.db.QueryRowContext(context.Background(),
		"SELECT count(*) FROM usage_ledger WHERE request_id IN ('queued')").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows for the withdrawn reservation (%v), want none", n, err)
	}
	b, err := setup.l.Audit(context.Background())
	if err != nil || b.Reserved != 0 {
		t.Errorf("books after the thaw: %+v, %v; want balanced, nothing reserved", b, err)
	}
}

// checkBatcherBound runs n calls through a batcher whose first batch
// blocks until the test releases it, as a statement on a frozen database
// does: some calls are in that batch, the others queue behind it. The
// callers of a random subset leave (their contexts end) while it blocks,
// and the bound must hold: each returns while the batch still blocks; one
// whose call the blocked batch holds gets ErrOutcomeUnknown, one whose
// call was still queued its context's error, and its call never reaches a
// batch. Once released, the callers that stayed get their batch's answer.
func checkBatcherBound(t *testing.T, seed uint64, n int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	release := make(chan struct{})
	var (
		mu      sync.Mutex
		seen    = map[int]bool{}
		blocked = map[int]bool{}
		first   = true
		serial  sync.Mutex
	)
	b := &batcher[int, int]{serial: &serial, run: func(_ context.Context, calls []*call[int, int]) {
		mu.Lock()
		block := first
		first = false
		for _, c := range calls {
			if seen[c.in] {
				t.Errorf("call %d ran twice", c.in)
			}
			seen[c.in] = true
			blocked[c.in] = block
		}
		mu.Unlock()
		if block {
			<-release
		}
		for _, c := range calls {
			c.out, c.ok = c.in*2, true
		}
	}}
	type result struct {
		out  int
		ok   bool
		err  error
		left bool // the caller's context ended
	}
	results := make([]result, n)
	cancels := make([]context.CancelFunc, n)
	var leaving, staying sync.WaitGroup
	pending := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.pending)
	}
	start := func(from, to int) {
		for i := from; i < to; i++ {
			ctx, cancel := context.WithCancel(context.Background())
			cancels[i] = cancel
			results[i].left = rng.IntN(2) == 0
			wg := &staying
			if results[i].left {
				wg = &leaving
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i].out, results[i].ok, results[i].err = b.do(ctx, i)
			}()
		}
		testenv.Eventually(t, "the calls to queue", func() bool { return pending() == to-from })
	}
	inBatch := 1 + rng.IntN(n) // the blocked batch's calls, at least one
	serial.Lock()              // another batch runs: the calls queue
	start(0, inBatch)
	serial.Unlock()
	// The batch counts itself before it runs; wait until it has recorded
	// its calls (under mu), or a caller that leaves meanwhile would be
	// judged before its batch said it held it.
	testenv.Eventually(t, "the first batch to block", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !first
	})
	start(inBatch, n)
	for i, r := range results {
		if r.left {
			cancels[i]()
		}
	}
	returned := make(chan struct{})
	go func() { leaving.Wait(); close(returned) }()
	select {
	case <-returned:
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatal("callers that left were held by a blocked batch")
	}
	close(release)
	staying.Wait()
	for _, cancel := range cancels {
		cancel()
	}
	mu.Lock()
	defer mu.Unlock()
	for i, r := range results {
		switch {
		case r.err == nil:
			if !r.ok || r.out != 2*i || !seen[i] {
				t.Errorf("call %d: %+v without an error, but its batch did not answer it", i, r)
			}
		case !r.left:
			t.Errorf("call %d whose caller stayed: %v", i, r.err)
		case blocked[i]:
			if !errors.Is(r.err, ErrOutcomeUnknown) {
				t.Errorf("call %d left its running batch: %v, want ErrOutcomeUnknown", i, r.err)
			}
		case seen[i]:
			t.Errorf("call %d ran after its caller left: %v", i, r.err)
		case !errors.Is(r.err, context.Canceled) || errors.Is(r.err, ErrOutcomeUnknown):
			t.Errorf("call %d withdrawn: %v, want its context's error", i, r.err)
		}
	}
	if n := pending(); n != 0 {
		t.Errorf("%d calls still queued", n)
	}
}

// TestBatcherHoldsNoCallerPastItsDeadline checks the batcher's bound on
// random mixes of callers (checkBatcherBound).
func TestBatcherHoldsNoCallerPastItsDeadline(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkBatcherBound(t, seed, 50) })
	}
}

// FuzzBatcherBound checks the batcher's bound on fuzzed mixes of callers.
func FuzzBatcherBound(f *testing.F) {
	f.Add(uint64(1), uint8(1))
	f.Add(uint64(2), uint8(40))
	f.Add(uint64(3), uint8(255))
	f.Fuzz(func(t *testing.T, seed uint64, n uint8) {
		checkBatcherBound(t, seed, int(n)+1)
	})
}
