package quota

import (
	"context"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestFinishReleasesCountsAndWakes: one Finish gives back the slot, counts
// the tokens once per request (shared with CountTokens, whoever comes
// first), and wakes the head of the model's queue on another replica.
func TestFinishReleasesCountsAndWakes(t *testing.T) {
	e := newQueueEnv(t, slowPoll)
	ctx := context.Background()
	clock := testingclock.NewFakeClock(time.Date(2025, 3, 14, 18, 30, 0, 0, time.UTC))
	l := newLimiter(t, e.rdb, Config{Prefix: e.keys.prefix, Clock: clock})
	if d, err := l.Admit(ctx, "k_f", "req_1", KeyLimits{MaxStreams: 1}); err != nil || !d.Allowed {
		t.Fatalf("Admit = %+v, %v", d, err)
	}
	_, done := e.waitingHead(t, "m")
	got, err := l.Finish(ctx, Finish{KeyID: "k_f", RequestID: "req_1", Release: true, Tokens: 120, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Counted || !got.Woken {
		t.Errorf("Finish = %+v, want counted and woken", got)
	}
	if n := e.rdb.ZCard(ctx, l.Keys().Streams("k_f")).Val(); n != 0 {
		t.Errorf("%d slots held after Finish, want 0", n)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait = %v", err)
		}
	case <-time.After(slowPoll / 2): // the poll would take slowPoll
		t.Fatal("Finish did not wake the queue's head")
	}
	day := l.Keys().TokensPerDay("k_f", clock.Now())
	total := func() int64 { v, _ := e.rdb.Get(ctx, day).Int64(); return v }
	if total() != 120 {
		t.Errorf("day = %d, want 120", total())
	}
	// Retried, or counted again by the sweeper: nothing more.
	if got, err := l.Finish(ctx, Finish{KeyID: "k_f", RequestID: "req_1", Release: true, Tokens: 120}); err != nil || got.Counted {
		t.Errorf("second Finish = %+v, %v; want not counted", got, err)
	}
	if counted, err := l.CountTokens(ctx, "k_f", "req_1", 120); err != nil || counted {
		t.Errorf("CountTokens after Finish = %v, %v; want not counted", counted, err)
	}
	if counted, err := l.CountTokens(ctx, "k_f", "req_2", 30); err != nil || !counted {
		t.Fatalf("CountTokens = %v, %v", counted, err)
	}
	if got, err := l.Finish(ctx, Finish{KeyID: "k_f", RequestID: "req_2", Tokens: 30}); err != nil || got.Counted {
		t.Errorf("Finish after CountTokens = %+v, %v; want not counted", got, err)
	}
	if total() != 150 {
		t.Errorf("day = %d, want 150", total())
	}
	if ttl := e.rdb.PTTL(ctx, day).Val(); ttl <= 29*time.Hour || ttl > 29*time.Hour+30*time.Minute {
		t.Errorf("TTL of the day's counter = %v, want 29 h 30 min (48 h from the day's start)", ttl)
	}
	// No tokens and no slot: only the wake-up, on an empty queue.
	if got, err := l.Finish(ctx, Finish{KeyID: "k_f", RequestID: "req_3", Model: "m"}); err != nil || got != (Finished{}) {
		t.Errorf("Finish of nothing = %+v, %v", got, err)
	}
	if e.rdb.Exists(ctx, l.Keys().TokensCounted("k_f", "req_3")).Val() != 0 {
		t.Error("a request with no tokens left a counted marker")
	}
}

// TestFinishAfterTheServerForgotItsScripts: a server that lost its script
// cache (a restart) is sent the sources.
func TestFinishAfterTheServerForgotItsScripts(t *testing.T) {
	e := newQueueEnv(t, slowPoll)
	ctx := context.Background()
	l := newLimiter(t, e.rdb, Config{Prefix: e.keys.prefix})
	if _, err := l.Admit(ctx, "k_s", "req_1", KeyLimits{MaxStreams: 1}); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := l.Finish(ctx, Finish{KeyID: "k_s", RequestID: "req_1", Release: true, Tokens: 5, Model: "m"})
	if err != nil || !got.Counted {
		t.Fatalf("Finish = %+v, %v; want counted", got, err)
	}
	if n := e.rdb.ZCard(ctx, l.Keys().Streams("k_s")).Val(); n != 0 {
		t.Errorf("%d slots held, want 0", n)
	}
}

func TestFinishRejectsBadArguments(t *testing.T) {
	e := newQueueEnv(t, slowPoll)
	l := newLimiter(t, e.rdb, Config{Prefix: e.keys.prefix})
	for _, f := range []Finish{
		{KeyID: "", RequestID: "r"},
		{KeyID: "k", RequestID: ""},
		{KeyID: "k", RequestID: "r", Tokens: -1},
		{KeyID: "k", RequestID: "r", Model: "a}b"},
	} {
		if _, err := l.Finish(context.Background(), f); err == nil {
			t.Errorf("Finish(%+v) = nil error", f)
		}
	}
}
