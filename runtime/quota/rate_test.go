package quota

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestRPMHoldsAcrossReplicas is "rpm holds across two gateway instances
// sharing Redis": two clients, each with its own Limiter, hammer one key
// through Admit; exactly rpm requests pass within the window. Tickets are
// off: a replica's unused tickets would hold places in the minute, and the
// count below is the script's (lease_test covers tickets).
func TestRPMHoldsAcrossReplicas(t *testing.T) {
	const (
		rpm        = 50
		attempts   = 400
		perReplica = 8
	)
	env := testenv.Redis(t)
	replicas := []*Limiter{
		newLimiter(t, env.Client(), Config{Prefix: env.Prefix, NoLeases: true}),
		newLimiter(t, env.Client(), Config{Prefix: env.Prefix, NoLeases: true}),
	}
	ctx := context.Background()
	var tickets, allowed atomic.Int64
	var mu sync.Mutex
	var refusals []AdmitDecision
	var wg sync.WaitGroup
	start := time.Now()
	for _, l := range replicas {
		for range perReplica {
			wg.Go(func() {
				for n := tickets.Add(1); n <= attempts; n = tickets.Add(1) {
					d, err := l.Admit(ctx, "k_rpm", fmt.Sprintf("req_%d", n), KeyLimits{RPM: rpm})
					if err != nil {
						t.Errorf("allow: %v", err)
						return
					}
					if d.Allowed {
						allowed.Add(1)
						continue
					}
					mu.Lock()
					refusals = append(refusals, d)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if took := time.Since(start); took >= rateWindow {
		t.Fatalf("the run took %v, longer than the window: the count below proves nothing", took)
	}
	if got := allowed.Load(); got != rpm {
		t.Errorf("allowed %d of %d within one window, want exactly %d", got, attempts, rpm)
	}
	if got := len(refusals); got != attempts-rpm {
		t.Errorf("refused %d, want %d", got, attempts-rpm)
	}
	for _, d := range refusals {
		if d.Refused != LimitRPM || d.RetryAfter <= 0 || d.RetryAfter > rateWindow || d.RPMRemaining != 0 {
			t.Fatalf("refusal %+v: want RetryAfter in (0, %v] and Remaining 0", d, rateWindow)
		}
	}
	n, err := env.Client().ZCard(ctx, replicas[0].Keys().RPM("k_rpm")).Result()
	if err != nil || n != rpm {
		t.Errorf("log holds %d entries (%v), want %d: refusals must not be recorded", n, err, rpm)
	}
}

// TestRPMWindowMoves shortens the window so the test can watch it slide on
// a real server: after RetryAfter the key admits again.
func TestRPMWindowMoves(t *testing.T) {
	const (
		rpm    = 5
		window = time.Second
	)
	env := testenv.Redis(t)
	a := newLimiter(t, env.Client(), Config{Prefix: env.Prefix, NoLeases: true})
	b := newLimiter(t, env.Client(), Config{Prefix: env.Prefix, NoLeases: true})
	lim := KeyLimits{RPM: rpm}
	a.window, b.window = window, window
	ctx := context.Background()
	for i := range rpm {
		l := []*Limiter{a, b}[i%2]
		d, err := l.Admit(ctx, "k", fmt.Sprintf("req_%d", i), lim)
		if err != nil || !d.Allowed || d.RPMRemaining != rpm-1-i {
			t.Fatalf("request %d: %+v, %v; want allowed with %d remaining", i, d, err, rpm-1-i)
		}
	}
	d, err := b.Admit(ctx, "k", "req_over", lim)
	if err != nil || d.Allowed {
		t.Fatalf("request over the limit: %+v, %v; want refused", d, err)
	}
	if d.RetryAfter <= 0 || d.RetryAfter > window {
		t.Fatalf("RetryAfter %v, want in (0, %v]", d.RetryAfter, window)
	}
	time.Sleep(d.RetryAfter + 10*time.Millisecond)
	if d, err := a.Admit(ctx, "k", "req_after", lim); err != nil || !d.Allowed {
		t.Errorf("after RetryAfter: %+v, %v; want allowed", d, err)
	}
}
