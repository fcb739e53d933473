package registry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// lockedJitter is a seeded jitter source safe for concurrent use.
func lockedJitter(seed uint64) func() float64 {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64()
	}
}

// TestRegistrationRateLimitAcrossReplicas: three replicas, each with its
// own client, see 1,000 registration attempts in a burst against 50/s.
// In every second of the Redis clock exactly min(attempts, 50) pass, every
// refusal carries a positive wait, and the waits spread the refused
// attempts over the following seconds instead of sending them back at once.
func TestRegistrationRateLimitAcrossReplicas(t *testing.T) {
	const limit, attempts, workers = 50, 1000, 30
	env := testenv.Redis(t)
	var replicas []*Registry
	for i := range 3 {
		r, err := New(env.Client(), Config{Prefix: env.Prefix, Jitter: lockedJitter(uint64(i + 1))})
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, r)
	}
	var mu sync.Mutex
	var decisions []regDecision
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range jobs {
				d, err := replicas[w%len(replicas)].allowRegistration(context.Background(), limit)
				if err != nil {
					t.Errorf("allowRegistration: %v", err)
					continue
				}
				mu.Lock()
				decisions = append(decisions, d)
				mu.Unlock()
			}
		})
	}
	for i := range attempts {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(decisions) != attempts {
		t.Fatalf("got %d decisions, want %d", len(decisions), attempts)
	}

	tried := map[int64]int{}   // attempts per server second
	allowed := map[int64]int{} // admitted per server second
	returns := map[int64]int{} // refused attempts per second they are sent back to
	waits := map[time.Duration]bool{}
	for _, d := range decisions {
		sec := d.serverTime.Unix()
		tried[sec]++
		if d.allowed {
			allowed[sec]++
			if d.retryAfter != 0 {
				t.Errorf("admitted attempt has retryAfter %v, want 0", d.retryAfter)
			}
			continue
		}
		if d.retryAfter <= 0 || d.retryAfter > MaxRegistrationRetryAfter {
			t.Errorf("refused attempt %d has retryAfter %v, want in (0, %v]", d.n, d.retryAfter, MaxRegistrationRetryAfter)
		}
		back := d.serverTime.Add(d.retryAfter)
		if back.Unix() <= sec {
			t.Errorf("refused attempt %d at %v sent back within its own second (%v)", d.n, d.serverTime, back)
		}
		returns[back.Unix()]++
		waits[d.retryAfter] = true
	}
	for sec, n := range tried {
		if got, want := allowed[sec], min(n, limit); got != want {
			t.Errorf("second %d: %d of %d attempts allowed, want %d", sec, got, n, want)
		}
	}
	refused := attempts - sum(allowed)
	if refused == 0 {
		t.Fatalf("no attempt refused: the burst spread over %d seconds", len(tried))
	}
	if len(waits) < refused/2 {
		t.Errorf("%d refusals share %d distinct waits, want at least %d", refused, len(waits), refused/2)
	}
	// Each second of the burst sends back at most limit per later second.
	for sec, n := range returns {
		if n > limit*len(tried) {
			t.Errorf("%d refused attempts sent back to second %d, want at most %d", n, sec, limit*len(tried))
		}
	}
	if wantSeconds := refused / (limit * len(tried)); len(returns) < wantSeconds {
		t.Errorf("refusals sent back to %d seconds, want at least %d", len(returns), wantSeconds)
	}
	t.Logf("burst spanned %d server seconds, %d allowed, %d refused over %d later seconds", len(tried), sum(allowed), refused, len(returns))
}

func sum(m map[int64]int) int {
	s := 0
	for _, v := range m {
		s += v
	}
	return s
}

// TestAllowRegistrationSkewedClock: a replica whose clock is an hour off
// still counts in the server's current second: the script refuses the
// wrong second and the retry uses the server time it returned.
func TestAllowRegistrationSkewedClock(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	skewed := testingclock.NewFakeClock(time.Now().Add(-time.Hour))
	r, err := New(rdb, Config{Prefix: env.Prefix, Clock: skewed})
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.allowRegistration(context.Background(), 1)
	if err != nil || !d.allowed || d.n != 1 {
		t.Fatalf("first attempt = %+v, %v; want allowed as number 1", d, err)
	}
	if skew := time.Since(d.serverTime); skew < -time.Second || skew > time.Second {
		t.Errorf("counted at %v, %v from now; want the server's current time", d.serverTime, skew)
	}
	key := r.Keys().Registrations(d.serverTime.Unix())
	if n, err := rdb.Get(context.Background(), key).Int(); err != nil || n != 1 {
		t.Errorf("%s = %d, %v; want 1", key, n, err)
	}
	if pttl := rdb.PTTL(context.Background(), key).Val(); pttl <= 0 || pttl > regKeyTTL {
		t.Errorf("PTTL of %s = %v, want in (0, %v]", key, pttl, regKeyTTL)
	}
}

func TestAllowRegistrationRejectsLimit(t *testing.T) {
	env := testenv.Redis(t)
	r := newRegistry(t, env.Client(), env.Prefix)
	for _, limit := range []int{0, -1} {
		if _, _, err := r.AllowRegistration(context.Background(), limit); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("AllowRegistration(%d) = %v, want ErrInvalidLimit", limit, err)
		}
	}
}

// TestAllowNodeRegistration: each node id gets its own window of
// admissions; refusals carry the rest of the window and do not extend it,
// and another node is not touched by the first one's count.
func TestAllowNodeRegistration(t *testing.T) {
	const limit, window = 3, 2 * time.Second
	env := testenv.Redis(t)
	r := newRegistry(t, env.Client(), env.Prefix)
	ctx := t.Context()
	for i := range limit {
		ok, wait, err := r.AllowNodeRegistration(ctx, "looper", limit, window)
		if err != nil || !ok || wait != 0 {
			t.Fatalf("attempt %d = %v, %v, %v; want admitted", i+1, ok, wait, err)
		}
	}
	for i := range 5 {
		ok, wait, err := r.AllowNodeRegistration(ctx, "looper", limit, window)
		if err != nil || ok || wait <= 0 || wait > window {
			t.Fatalf("attempt %d over the limit = %v, %v, %v; want refused with a wait in (0, %v]", limit+i+1, ok, wait, err, window)
		}
	}
	if n, err := env.Client().Get(ctx, r.Keys().NodeRegistrations("looper")).Int(); err != nil || n != limit {
		t.Errorf("counter = %d, %v; want %d: refusals must not count", n, err, limit)
	}
	if ok, _, err := r.AllowNodeRegistration(ctx, "other", limit, window); err != nil || !ok {
		t.Errorf("another node = %v, %v; want admitted", ok, err)
	}
	// The window ends by itself.
	testenv.EventuallyNil(t, window+testenv.WaitFor, "the node's window to end", func() error {
		ok, wait, err := r.AllowNodeRegistration(ctx, "looper", limit, window)
		if err == nil && !ok {
			err = fmt.Errorf("refused, retry after %v", wait)
		}
		return err
	})
}

func TestAllowNodeRegistrationRejects(t *testing.T) {
	env := testenv.Redis(t)
	r := newRegistry(t, env.Client(), env.Prefix)
	tests := []struct {
		name   string
		node   string
		limit  int
		window time.Duration
		want   error
	}{
		{"zero limit", "n", 0, time.Second, ErrInvalidLimit},
		{"no window", "n", 1, 0, ErrInvalidLimit},
		{"bad id", "a{b}", 1, time.Second, ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := r.AllowNodeRegistration(t.Context(), tt.node, tt.limit, tt.window); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestAllowNodeRegistrationAcrossReplicas: attempts of one node racing
// through three replicas are admitted exactly limit times in a window.
func TestAllowNodeRegistrationAcrossReplicas(t *testing.T) {
	const limit, attempts = 10, 300
	env := testenv.Redis(t)
	var replicas []*Registry
	for range 3 {
		replicas = append(replicas, newRegistry(t, env.Client(), env.Prefix))
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Go(func() {
			ok, _, err := replicas[i%len(replicas)].AllowNodeRegistration(context.Background(), "racer", limit, time.Minute)
			if err != nil {
				t.Errorf("AllowNodeRegistration: %v", err)
			}
			if ok {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != limit {
		t.Errorf("%d of %d racing attempts admitted, want exactly %d", got, attempts, limit)
	}
}
