package quota

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// raise sets peak to v when v is larger.
func raise(peak *atomic.Int64, v int64) {
	for {
		p := peak.Load()
		if v <= p || peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// sampleCard reads the cardinality of key until stop closes and returns
// the largest value seen and the number of reads.
func sampleCard(ctx context.Context, rdb *redis.Client, key string, stop <-chan struct{}) (peak, samples int64, err error) {
	for {
		select {
		case <-stop:
			return peak, samples, nil
		default:
		}
		n, err := rdb.ZCard(ctx, key).Result()
		if err != nil {
			return peak, samples, err
		}
		peak = max(peak, n)
		samples++
	}
}

// TestAcquireStreamHoldsUnderConcurrency is the requirement that 500 streams
// on one key never exceed max_streams (docs/requirements.md), checked in Redis and in process.
func TestAcquireStreamHoldsUnderConcurrency(t *testing.T) {
	const (
		clients    = 500
		maxStreams = 10
	)
	env := testenv.Redis(t)
	rdb := env.Client()
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix})
	ctx := context.Background()
	key := l.Keys().Streams("k_500")

	stop := make(chan struct{})
	type sample struct {
		peak, n int64
		err     error
	}
	sampled := make(chan sample, 1)
	go func() {
		p, n, err := sampleCard(ctx, env.Client(), key, stop)
		sampled <- sample{p, n, err}
	}()

	var held, peakHeld, allowed, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			rid := fmt.Sprintf("req_%d", i)
			<-start
			// Spread arrivals so acquires interleave with releases.
			time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
			d, err := l.AcquireStream(ctx, "k_500", rid, maxStreams)
			if err != nil {
				t.Errorf("acquire %s: %v", rid, err)
				return
			}
			if !d.Allowed {
				refused.Add(1)
				if d.RetryAfter <= 0 || d.RetryAfter > streamRetryHint {
					t.Errorf("refused %s: RetryAfter %v, want in (0, %v]", rid, d.RetryAfter, streamRetryHint)
				}
				return
			}
			allowed.Add(1)
			raise(&peakHeld, held.Add(1))
			if d.Active > maxStreams {
				t.Errorf("acquire %s: Active %d > %d", rid, d.Active, maxStreams)
			}
			time.Sleep(time.Duration(1+rng.IntN(5)) * time.Millisecond)
			held.Add(-1)
			if err := l.ReleaseStream(ctx, "k_500", rid); err != nil {
				t.Errorf("release %s: %v", rid, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(stop)
	s := <-sampled
	if s.err != nil {
		t.Fatalf("sample ZCARD: %v", s.err)
	}

	if got := peakHeld.Load(); got > maxStreams {
		t.Errorf("in-process peak of held slots = %d, want <= %d", got, maxStreams)
	}
	if s.peak > maxStreams {
		t.Errorf("peak ZCARD over %d samples = %d, want <= %d", s.n, s.peak, maxStreams)
	}
	if s.n == 0 {
		t.Errorf("the sampler read ZCARD 0 times")
	}
	if got := allowed.Load() + refused.Load(); got != clients {
		t.Errorf("allowed+refused = %d, want %d", got, clients)
	}
	if allowed.Load() < maxStreams || refused.Load() == 0 {
		t.Errorf("allowed %d, refused %d: want at least %d allowed and some refused", allowed.Load(), refused.Load(), maxStreams)
	}
	if n, err := rdb.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("after every release EXISTS %s = %d, %v; want 0 (empty set)", key, n, err)
	}
	t.Logf("allowed %d, refused %d, peak held %d, peak ZCARD %d over %d samples",
		allowed.Load(), refused.Load(), peakHeld.Load(), s.peak, s.n)
}

func TestAcquireStreamIsIdempotentPerRequest(t *testing.T) {
	env := testenv.Redis(t)
	l := newLimiter(t, env.Client(), Config{Prefix: env.Prefix})
	ctx := context.Background()
	steps := []struct {
		name       string
		call       func() (StreamDecision, error)
		wantOK     bool
		wantActive int
	}{
		{"first acquire", func() (StreamDecision, error) { return l.AcquireStream(ctx, "k", "req_a", 1) }, true, 1},
		{"same request again", func() (StreamDecision, error) { return l.AcquireStream(ctx, "k", "req_a", 1) }, true, 1},
		{"another request is refused", func() (StreamDecision, error) { return l.AcquireStream(ctx, "k", "req_b", 1) }, false, 1},
		{"after release it is allowed", func() (StreamDecision, error) {
			if err := l.ReleaseStream(ctx, "k", "req_a"); err != nil {
				return StreamDecision{}, err
			}
			return l.AcquireStream(ctx, "k", "req_b", 1)
		}, true, 1},
	}
	for _, s := range steps {
		d, err := s.call()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if d.Allowed != s.wantOK || d.Active != s.wantActive {
			t.Errorf("%s: got %+v, want Allowed=%v Active=%d", s.name, d, s.wantOK, s.wantActive)
		}
		if !d.Allowed && (d.RetryAfter <= 0 || d.RetryAfter > streamRetryHint) {
			t.Errorf("%s: RetryAfter %v, want in (0, %v]", s.name, d.RetryAfter, streamRetryHint)
		}
	}
	if err := l.ReleaseStream(ctx, "k", "req_gone"); err != nil {
		t.Errorf("releasing a slot never held: %v, want nil", err)
	}
}

// TestCrashedSlotIsFreedAfterMaxStreamDuration is the anchors' leaked slot:
// a holder that never releases stops counting after MaxStreamDuration while
// the key itself lives on (another stream keeps its TTL fresh).
func TestCrashedSlotIsFreedAfterMaxStreamDuration(t *testing.T) {
	const life = time.Second
	env := testenv.Redis(t)
	rdb := env.Client()
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, MaxStreamDuration: life})
	ctx := context.Background()
	acquire := func(rid string) StreamDecision {
		t.Helper()
		d, err := l.AcquireStream(ctx, "k", rid, 2)
		if err != nil {
			t.Fatalf("acquire %s: %v", rid, err)
		}
		return d
	}
	t0 := time.Now()
	if d := acquire("req_crashed"); !d.Allowed {
		t.Fatalf("crashed holder refused: %+v", d)
	}
	time.Sleep(life / 2)
	if d := acquire("req_live"); !d.Allowed {
		t.Fatalf("live holder refused: %+v", d)
	}
	if d := acquire("req_third"); d.Allowed {
		t.Fatalf("third holder allowed with 2 held: %+v", d)
	}
	time.Sleep(time.Until(t0.Add(life + life/10)))
	if d := acquire("req_third"); !d.Allowed || d.Active != 2 {
		t.Fatalf("after the crashed slot's deadline: got %+v, want allowed with 2 active", d)
	}
	key := l.Keys().Streams("k")
	if _, err := rdb.ZScore(ctx, key, "req_crashed").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("crashed slot still in the set (err %v)", err)
	}
	if _, err := rdb.ZScore(ctx, key, "req_live").Result(); err != nil {
		t.Errorf("live slot gone: %v; the key must have expired as a whole, not been purged", err)
	}
}

func TestRefreshStreamExtendsTheDeadline(t *testing.T) {
	const life = 600 * time.Millisecond
	env := testenv.Redis(t)
	l := newLimiter(t, env.Client(), Config{Prefix: env.Prefix, MaxStreamDuration: life})
	ctx := context.Background()
	if d, err := l.AcquireStream(ctx, "k", "req_long", 1); err != nil || !d.Allowed {
		t.Fatalf("acquire: %+v, %v", d, err)
	}
	time.Sleep(life / 2)
	if ok, err := l.RefreshStream(ctx, "k", "req_long"); err != nil || !ok {
		t.Fatalf("refresh a held slot = %v, %v; want true", ok, err)
	}
	time.Sleep(life * 3 / 4) // past the first deadline, before the refreshed one
	if d, err := l.AcquireStream(ctx, "k", "req_other", 1); err != nil || d.Allowed {
		t.Fatalf("acquire beside a refreshed slot = %+v, %v; want refused", d, err)
	}
	if err := l.ReleaseStream(ctx, "k", "req_long"); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.RefreshStream(ctx, "k", "req_long"); err != nil || ok {
		t.Errorf("refresh a released slot = %v, %v; want false", ok, err)
	}
}

func TestLimiterRejectsBadArguments(t *testing.T) {
	env := testenv.Redis(t)
	l := newLimiter(t, env.Client(), Config{Prefix: env.Prefix})
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"empty key id", func() error { _, err := l.AcquireStream(ctx, "", "req", 1); return err }, ErrInvalidName},
		{"key id with a brace", func() error { _, err := l.AllowRequest(ctx, "a}", 1); return err }, ErrInvalidName},
		{"request id with a space", func() error { _, err := l.AcquireStream(ctx, "k", "a b", 1); return err }, ErrInvalidName},
		{"zero max streams", func() error { _, err := l.AcquireStream(ctx, "k", "req", 0); return err }, ErrInvalidLimit},
		{"negative rpm", func() error { _, err := l.AllowRequest(ctx, "k", -1); return err }, ErrInvalidLimit},
		{"zero tokens per day", func() error { _, err := l.CheckTokens(ctx, "k", 0); return err }, ErrInvalidLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}
