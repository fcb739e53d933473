package quota

import (
	"context"
	"fmt"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestTokensPerDay walks a key's day the gateway's way: Admit reads the
// day's count, CountTokens adds a settled request's tokens, and a new UTC
// day starts from zero.
func TestTokensPerDay(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	clock := testingclock.NewFakeClock(time.Date(2025, 3, 14, 18, 30, 0, 0, time.UTC))
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, Clock: clock, NoLeases: true})
	ctx := context.Background()
	seq := 0
	admit := func(key string, limit int64) AdmitDecision {
		t.Helper()
		seq++
		d, err := l.Admit(ctx, key, fmt.Sprintf("req_%d", seq), KeyLimits{TokensPerDay: limit})
		if err != nil {
			t.Fatalf("admit %s: %v", key, err)
		}
		return d
	}
	count := func(key, rid string, n int64) {
		t.Helper()
		if _, err := l.CountTokens(ctx, key, rid, n); err != nil {
			t.Fatalf("count %s: %v", key, err)
		}
	}

	if got, want := admit("k_a", 1000), (AdmitDecision{Allowed: true, TokensRemaining: 1000}); got != want {
		t.Errorf("fresh key: got %+v, want %+v", got, want)
	}
	count("k_a", "req_x", 600)
	count("k_a", "req_y", 400)
	steps := []struct {
		name  string
		key   string
		limit int64
		want  AdmitDecision
	}{
		{"limit reached", "k_a", 1000, AdmitDecision{Refused: LimitTokensPerDay, RetryAfter: 5*time.Hour + 30*time.Minute}},
		{"a larger limit has room", "k_a", 1500, AdmitDecision{Allowed: true, TokensRemaining: 500}},
		{"another key is unaffected", "k_b", 1000, AdmitDecision{Allowed: true, TokensRemaining: 1000}},
	}
	for _, s := range steps {
		if got := admit(s.key, s.limit); got != s.want {
			t.Errorf("%s: got %+v, want %+v", s.name, got, s.want)
		}
	}
	day := l.Keys().TokensPerDay("k_a", clock.Now())
	ttl, err := rdb.PTTL(ctx, day).Result()
	if want := 29*time.Hour + 30*time.Minute; err != nil || ttl <= want-time.Minute || ttl > want {
		t.Errorf("TTL of %s = %v (%v), want about %v (48 h from the day's start)", day, ttl, err, want)
	}

	clock.SetTime(time.Date(2025, 3, 15, 0, 0, 1, 0, time.UTC))
	if got, want := admit("k_a", 1000), (AdmitDecision{Allowed: true, TokensRemaining: 1000}); got != want {
		t.Errorf("next UTC day: got %+v, want %+v", got, want)
	}
	count("k_a", "req_z", 7)
	for key, want := range map[string]string{day: "1000", l.Keys().TokensPerDay("k_a", clock.Now()): "7"} {
		if got, err := rdb.Get(ctx, key).Result(); err != nil || got != want {
			t.Errorf("GET %s = %q, %v; want %q", key, got, err, want)
		}
	}
}

// TestCountTokensOncePerRequest: a request's tokens count once on its
// key's day however many settles report them.
func TestCountTokensOncePerRequest(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	clock := testingclock.NewFakeClock(time.Date(2025, 3, 14, 18, 30, 0, 0, time.UTC))
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, Clock: clock})
	ctx := context.Background()
	for i, tc := range []struct {
		rid       string
		n         int64
		want      bool
		wantTotal int64
	}{
		{"req_a", 100, true, 100},
		{"req_a", 100, false, 100}, // a retried settle
		{"req_b", 40, true, 140},
		{"req_a", 7, false, 140}, // the sweeper, later
	} {
		counted, err := l.CountTokens(ctx, "k_once", tc.rid, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		total, _ := rdb.Get(ctx, l.Keys().TokensPerDay("k_once", clock.Now())).Int64()
		if counted != tc.want || total != tc.wantTotal {
			t.Errorf("call %d (%s, %d): counted %v, day %d; want %v, %d", i, tc.rid, tc.n, counted, total, tc.want, tc.wantTotal)
		}
	}
	if ttl := rdb.PTTL(ctx, l.Keys().TokensCounted("k_once", "req_a")).Val(); ttl <= 0 || ttl > countedRetention {
		t.Errorf("the marker's TTL is %v, want within (0, %v]", ttl, countedRetention)
	}
}
