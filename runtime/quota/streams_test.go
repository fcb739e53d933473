package quota

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
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

// TestStreamSlotsHoldUnderConcurrency is the requirement "500 streams on
// one key never exceed max_streams" (docs/requirements.md), on the path the gateway takes: Admit
// takes the slot (on a ticket or in Redis), Finish gives it back. It is
// checked in Redis (the slots set, tickets included, sampled throughout)
// and in process.
func TestStreamSlotsHoldUnderConcurrency(t *testing.T) {
	const (
		clients    = 500
		maxStreams = 10
	)
	env := testenv.Redis(t)
	rdb := env.Client()
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix})
	ctx := context.Background()
	key := l.Keys().Streams("k_500")
	lim := KeyLimits{MaxStreams: maxStreams}

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
			// Spread arrivals so admissions interleave with releases.
			time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
			d, err := l.Admit(ctx, "k_500", rid, lim)
			if err != nil {
				t.Errorf("admit %s: %v", rid, err)
				return
			}
			if !d.Allowed {
				refused.Add(1)
				if d.Refused != LimitStreams || d.RetryAfter <= 0 || d.RetryAfter > streamRetryHint {
					t.Errorf("refused %s: %+v, want refused by streams with RetryAfter in (0, %v]", rid, d, streamRetryHint)
				}
				return
			}
			allowed.Add(1)
			raise(&peakHeld, held.Add(1))
			if d.ActiveStreams > maxStreams {
				t.Errorf("admit %s: ActiveStreams %d > %d", rid, d.ActiveStreams, maxStreams)
			}
			time.Sleep(time.Duration(1+rng.IntN(5)) * time.Millisecond)
			held.Add(-1)
			if _, err := l.Finish(ctx, Finish{KeyID: "k_500", RequestID: rid, Release: true}); err != nil {
				t.Errorf("finish %s: %v", rid, err)
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
	// Every request's slot is back; a ticket nobody used keeps its slot
	// until its own short life ends.
	members, err := rdb.ZRange(ctx, key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if strings.HasPrefix(m, "req_") {
			t.Errorf("slot of %s still held after its Finish", m)
		}
	}
	t.Logf("allowed %d, refused %d, peak held %d, peak ZCARD %d over %d samples, %d on tickets",
		allowed.Load(), refused.Load(), peakHeld.Load(), s.peak, s.n, l.leases.used.Load())
}

func TestStreamSlotIsIdempotentPerRequest(t *testing.T) {
	env := testenv.Redis(t)
	l := newLimiter(t, env.Client(), Config{Prefix: env.Prefix, NoLeases: true})
	ctx := context.Background()
	lim := KeyLimits{MaxStreams: 1}
	steps := []struct {
		name       string
		call       func() (AdmitDecision, error)
		wantOK     bool
		wantActive int
	}{
		{"first admit", func() (AdmitDecision, error) { return l.Admit(ctx, "k", "req_a", lim) }, true, 1},
		{"same request again", func() (AdmitDecision, error) { return l.Admit(ctx, "k", "req_a", lim) }, true, 1},
		{"another request is refused", func() (AdmitDecision, error) { return l.Admit(ctx, "k", "req_b", lim) }, false, 1},
		{"after release it is allowed", func() (AdmitDecision, error) {
			if err := l.ReleaseStream(ctx, "k", "req_a"); err != nil {
				return AdmitDecision{}, err
			}
			return l.Admit(ctx, "k", "req_b", lim)
		}, true, 1},
	}
	for _, s := range steps {
		d, err := s.call()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if d.Allowed != s.wantOK || d.ActiveStreams != s.wantActive {
			t.Errorf("%s: got %+v, want Allowed=%v ActiveStreams=%d", s.name, d, s.wantOK, s.wantActive)
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
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, MaxStreamDuration: life, NoLeases: true})
	ctx := context.Background()
	admit := func(rid string) AdmitDecision {
		t.Helper()
		d, err := l.Admit(ctx, "k", rid, KeyLimits{MaxStreams: 2})
		if err != nil {
			t.Fatalf("admit %s: %v", rid, err)
		}
		return d
	}
	t0 := time.Now()
	if d := admit("req_crashed"); !d.Allowed {
		t.Fatalf("crashed holder refused: %+v", d)
	}
	time.Sleep(life / 2)
	if d := admit("req_live"); !d.Allowed {
		t.Fatalf("live holder refused: %+v", d)
	}
	if d := admit("req_third"); d.Allowed {
		t.Fatalf("third holder allowed with 2 held: %+v", d)
	}
	time.Sleep(time.Until(t0.Add(life + life/10)))
	if d := admit("req_third"); !d.Allowed || d.ActiveStreams != 2 {
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

func TestLimiterRejectsBadArguments(t *testing.T) {
	env := testenv.Redis(t)
	l := newLimiter(t, env.Client(), Config{Prefix: env.Prefix})
	ctx := context.Background()
	admit := func(key, rid string, lim KeyLimits) func() error {
		return func() error { _, err := l.Admit(ctx, key, rid, lim); return err }
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"empty key id", admit("", "req", KeyLimits{MaxStreams: 1}), ErrInvalidName},
		{"key id with a brace", admit("a}", "req", KeyLimits{RPM: 1}), ErrInvalidName},
		{"request id with a space", admit("k", "a b", KeyLimits{MaxStreams: 1}), ErrInvalidName},
		{"negative max streams", admit("k", "req", KeyLimits{MaxStreams: -1}), ErrInvalidLimit},
		{"negative rpm", admit("k", "req", KeyLimits{RPM: -1}), ErrInvalidLimit},
		{"negative tokens per day", admit("k", "req", KeyLimits{TokensPerDay: -1}), ErrInvalidLimit},
		{"release with an empty key id", func() error { return l.ReleaseStream(ctx, "", "req") }, ErrInvalidName},
		{"count with a request id with a brace", func() error { _, err := l.CountTokens(ctx, "k", "r{", 1); return err }, ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}
