package quota

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestAdmitOrderAndGiveBack walks one key through each refusal: a refused
// request holds no slot, and only a request that passed the slot and the
// day's tokens is counted against the minute.
func TestAdmitOrderAndGiveBack(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	clock := testingclock.NewFakeClock(time.Date(2025, 3, 14, 18, 30, 0, 0, time.UTC))
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, Clock: clock})
	ctx := context.Background()
	lim := KeyLimits{MaxStreams: 2, TokensPerDay: 1000, RPM: 3}
	admit := func(id string) AdmitDecision {
		t.Helper()
		d, err := l.Admit(ctx, "k_ad", id, lim)
		if err != nil {
			t.Fatalf("admit %s: %v", id, err)
		}
		return d
	}
	slots := func() int64 { return rdb.ZCard(ctx, l.Keys().Streams("k_ad")).Val() }
	counted := func() int64 { return rdb.ZCard(ctx, l.Keys().RPM("k_ad")).Val() }

	if d := admit("r1"); !d.Allowed || d.ActiveStreams != 1 || d.RPMRemaining != 2 || d.TokensRemaining != 1000 {
		t.Errorf("r1 = %+v, want allowed with 1 stream, 2 requests and 1000 tokens left", d)
	}
	if d := admit("r2"); !d.Allowed || d.ActiveStreams != 2 || d.RPMRemaining != 1 {
		t.Errorf("r2 = %+v, want allowed with 2 streams and 1 request left", d)
	}
	// Streams full: refused first, not counted against the minute.
	if d := admit("r3"); d.Allowed || d.Refused != LimitStreams || d.RetryAfter <= 0 || d.RetryAfter > streamRetryHint {
		t.Errorf("r3 = %+v, want refused by streams with a retry hint", d)
	}
	if slots() != 2 || counted() != 2 {
		t.Errorf("after the streams refusal: %d slots, %d counted; want 2 and 2", slots(), counted())
	}
	if err := l.ReleaseStream(ctx, "k_ad", "r1"); err != nil {
		t.Fatal(err)
	}
	// The day's tokens used up: refused, the slot taken back, not counted.
	if _, err := l.CountTokens(ctx, "k_ad", "r_done", 1000); err != nil {
		t.Fatal(err)
	}
	d := admit("r4")
	midnight := time.Date(2025, 3, 15, 0, 0, 0, 0, time.UTC).Sub(clock.Now())
	if d.Allowed || d.Refused != LimitTokensPerDay || d.RetryAfter != midnight || d.TokensRemaining != 0 {
		t.Errorf("r4 = %+v, want refused by tokens per day until midnight (%v)", d, midnight)
	}
	if slots() != 1 || counted() != 2 {
		t.Errorf("after the tokens refusal: %d slots, %d counted; want 1 and 2", slots(), counted())
	}
	// A new day's count is set by hand: the day's tokens only ever grow.
	if err := rdb.Set(ctx, l.Keys().TokensPerDay("k_ad", clock.Now()), 500, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if d := admit("r5"); !d.Allowed || d.RPMRemaining != 0 || d.TokensRemaining != 500 {
		t.Errorf("r5 = %+v, want allowed with no request and 500 tokens left", d)
	}
	if err := l.ReleaseStream(ctx, "k_ad", "r5"); err != nil {
		t.Fatal(err)
	}
	// The minute full: refused, the slot taken back.
	d = admit("r6")
	if d.Allowed || d.Refused != LimitRPM || d.RetryAfter <= 0 || d.RetryAfter > rateWindow {
		t.Errorf("r6 = %+v, want refused by rpm within the window", d)
	}
	if slots() != 1 || counted() != 3 {
		t.Errorf("after the rpm refusal: %d slots, %d counted; want 1 and 3", slots(), counted())
	}
}

// TestAdmitWithoutLimitsTouchesNothing: a key without limits costs no
// round trip and leaves no key behind.
func TestAdmitWithoutLimitsTouchesNothing(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix})
	d, err := l.Admit(context.Background(), "k_free", "r1", KeyLimits{})
	if err != nil || !d.Allowed {
		t.Fatalf("Admit = %+v, %v; want allowed", d, err)
	}
	if keys := rdb.Keys(context.Background(), env.Prefix+"*").Val(); len(keys) != 0 {
		t.Errorf("keys written: %v", keys)
	}
	if _, err := l.Admit(context.Background(), "k_free", "r1", KeyLimits{RPM: -1}); err == nil {
		t.Error("a negative limit was accepted")
	}
}

// TestAdmitHoldsUnderConcurrency is "500 streams on one key never exceed
// max_streams" through Admit, with an rpm that refuses some too: the slots
// never pass the limit, every refused request gives its slot back, and the
// minute admits exactly its rpm. It holds at any machine speed: the first
// admitted requests keep their slots until a request has been refused by
// the stream limit, and a request refused by streams tries again until it
// is admitted or the minute refuses it.
func TestAdmitHoldsUnderConcurrency(t *testing.T) {
	const (
		clients    = 500
		maxStreams = 10
		rpm        = 100
	)
	env := testenv.Redis(t)
	rdb := env.Client()
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix})
	ctx := context.Background()
	var held, peak, allowed, byStreams, byRPM atomic.Int64
	refusedByStreams := make(chan struct{}) // closed at the first stream refusal
	var refusedOnce sync.Once
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range clients {
		wg.Go(func() {
			rid := fmt.Sprintf("req_%d", i)
			<-start
			for {
				d, err := l.Admit(ctx, "k_500", rid, KeyLimits{MaxStreams: maxStreams, RPM: rpm})
				if err != nil {
					t.Errorf("admit %s: %v", rid, err)
					return
				}
				switch d.Refused {
				case LimitStreams:
					byStreams.Add(1)
					refusedOnce.Do(func() { close(refusedByStreams) })
					time.Sleep(time.Millisecond) // let a holder go; any wait works
					continue
				case LimitRPM:
					byRPM.Add(1)
					return
				}
				allowed.Add(1)
				raise(&peak, held.Add(1))
				<-refusedByStreams // hold the slot until the limit has refused someone
				held.Add(-1)
				if err := l.ReleaseStream(ctx, "k_500", rid); err != nil {
					t.Errorf("release %s: %v", rid, err)
				}
				return
			}
		})
	}
	close(start)
	wg.Wait()
	if got := peak.Load(); got > maxStreams {
		t.Errorf("peak held %d, want <= %d", got, maxStreams)
	}
	if got := allowed.Load() + byRPM.Load(); got != clients {
		t.Errorf("allowed+refused by rpm = %d, want every one of the %d clients", got, clients)
	}
	if byStreams.Load() == 0 || byRPM.Load() == 0 {
		t.Error("no request was refused by streams or by rpm: the test shows nothing")
	}
	if allowed.Load() != rpm {
		t.Errorf("allowed %d, want the minute's %d", allowed.Load(), rpm)
	}
	if got := rdb.ZCard(ctx, l.Keys().RPM("k_500")).Val(); got != allowed.Load() {
		t.Errorf("the minute counted %d, want the %d admitted", got, allowed.Load())
	}
	if n := rdb.Exists(ctx, l.Keys().Streams("k_500")).Val(); n != 0 {
		t.Errorf("slots left after every release: the key exists")
	}
	t.Logf("allowed %d, refusals by streams %d, by rpm %d, peak %d", allowed.Load(), byStreams.Load(), byRPM.Load(), peak.Load())
}
