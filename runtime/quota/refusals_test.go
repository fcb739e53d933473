package quota

import (
	"context"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestRefusals counts a key's 429s by minute: the last hour's are summed,
// older ones drop out, another key's never count, and every counter
// expires on its own.
func TestRefusals(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	start := time.Date(2025, 3, 14, 18, 30, 10, 0, time.UTC)
	clock := testingclock.NewFakeClock(start)
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, Clock: clock})
	ctx := context.Background()
	count := func(key string, n int) {
		t.Helper()
		for range n {
			if err := l.CountRefusal(ctx, key); err != nil {
				t.Fatalf("count refusal: %v", err)
			}
		}
	}
	read := func(key string, now time.Time) int64 {
		t.Helper()
		n, err := ReadRefusals(ctx, rdb, l.Keys(), key, now)
		if err != nil {
			t.Fatalf("read refusals: %v", err)
		}
		return n
	}
	count("key:1", 3)
	clock.SetTime(start.Add(20 * time.Minute))
	count("key:1", 2)
	count("key:2", 7)
	if got := read("key:1", clock.Now()); got != 5 {
		t.Errorf("key:1 in the last hour = %d, want 5", got)
	}
	if got := read("key:2", clock.Now()); got != 7 {
		t.Errorf("key:2 in the last hour = %d, want 7", got)
	}
	if got := read("key:3", clock.Now()); got != 0 {
		t.Errorf("a key never refused = %d, want 0", got)
	}
	// An hour after the first three, only the later two are in the window.
	if got := read("key:1", start.Add(time.Hour)); got != 2 {
		t.Errorf("key:1 an hour after its first refusals = %d, want 2", got)
	}
	ttl, err := rdb.TTL(ctx, l.Keys().Refusals("key:1", start)).Result()
	if err != nil || ttl <= 0 || ttl > refusalTTL {
		t.Errorf("a minute's counter has TTL %v (%v), want in (0, %v]", ttl, err, refusalTTL)
	}
	if err := l.CountRefusal(ctx, "bad{key}"); err == nil {
		t.Error("a key id with braces was counted")
	}
}
