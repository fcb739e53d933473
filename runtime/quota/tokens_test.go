package quota

import (
	"context"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// fakeNow is a settable clock for Config.Now; tests that use it run it
// from one goroutine.
type fakeNow struct{ t time.Time }

func (f *fakeNow) Now() time.Time { return f.t }

func TestTokensPerDay(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	clock := &fakeNow{t: time.Date(2025, 3, 14, 18, 30, 0, 0, time.UTC)}
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, Now: clock.Now})
	ctx := context.Background()
	check := func(key string, limit int64) TokenDecision {
		t.Helper()
		d, err := l.CheckTokens(ctx, key, limit)
		if err != nil {
			t.Fatalf("check %s: %v", key, err)
		}
		return d
	}
	add := func(key string, n int64) {
		t.Helper()
		if err := l.AddTokens(ctx, key, n); err != nil {
			t.Fatalf("add %s: %v", key, err)
		}
	}

	if got, want := check("k_a", 1000), (TokenDecision{Allowed: true, Remaining: 1000}); got != want {
		t.Errorf("fresh key: got %+v, want %+v", got, want)
	}
	add("k_a", 600)
	add("k_a", 400)
	steps := []struct {
		name  string
		key   string
		limit int64
		want  TokenDecision
	}{
		{"limit reached", "k_a", 1000, TokenDecision{RetryAfter: 5*time.Hour + 30*time.Minute}},
		{"a larger limit has room", "k_a", 1500, TokenDecision{Allowed: true, Remaining: 500}},
		{"another key is unaffected", "k_b", 1000, TokenDecision{Allowed: true, Remaining: 1000}},
	}
	for _, s := range steps {
		if got := check(s.key, s.limit); got != s.want {
			t.Errorf("%s: got %+v, want %+v", s.name, got, s.want)
		}
	}
	day := l.Keys().TokensPerDay("k_a", clock.t)
	ttl, err := rdb.PTTL(ctx, day).Result()
	if want := 29*time.Hour + 30*time.Minute; err != nil || ttl <= want-time.Minute || ttl > want {
		t.Errorf("TTL of %s = %v (%v), want about %v (48 h from the day's start)", day, ttl, err, want)
	}

	clock.t = time.Date(2025, 3, 15, 0, 0, 1, 0, time.UTC)
	if got, want := check("k_a", 1000), (TokenDecision{Allowed: true, Remaining: 1000}); got != want {
		t.Errorf("next UTC day: got %+v, want %+v", got, want)
	}
	add("k_a", 7)
	for key, want := range map[string]string{day: "1000", l.Keys().TokensPerDay("k_a", clock.t): "7"} {
		if got, err := rdb.Get(ctx, key).Result(); err != nil || got != want {
			t.Errorf("GET %s = %q, %v; want %q", key, got, err, want)
		}
	}
}

func TestAddTokensOnAdjustsTheAdmissionDay(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	clock := &fakeNow{t: time.Date(2025, 3, 15, 0, 0, 5, 0, time.UTC)}
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, Now: clock.Now})
	ctx := context.Background()
	admitted := time.Date(2025, 3, 14, 23, 59, 59, 0, time.UTC)
	if err := l.AddTokensOn(ctx, "k", admitted, 500); err != nil {
		t.Fatal(err)
	}
	if err := l.AddTokensOn(ctx, "k", admitted, -120); err != nil {
		t.Fatal(err)
	}
	if got, err := rdb.Get(ctx, l.Keys().TokensPerDay("k", admitted)).Int64(); err != nil || got != 380 {
		t.Errorf("admission day's counter = %d, %v; want 380", got, err)
	}
	if err := l.AddTokensOn(ctx, "k", admitted.Add(-72*time.Hour), 5); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Exists(ctx, l.Keys().TokensPerDay("k", admitted.Add(-72*time.Hour))).Result(); err != nil || n != 0 {
		t.Errorf("a day past retention was written (%d, %v)", n, err)
	}
}

// TestCountTokensOncePerRequest: a request's tokens count once on its
// key's day however many settles report them.
func TestCountTokensOncePerRequest(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	clock := &fakeNow{t: time.Date(2025, 3, 14, 18, 30, 0, 0, time.UTC)}
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, Now: clock.Now})
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
		total, _ := rdb.Get(ctx, l.Keys().TokensPerDay("k_once", clock.t)).Int64()
		if counted != tc.want || total != tc.wantTotal {
			t.Errorf("call %d (%s, %d): counted %v, day %d; want %v, %d", i, tc.rid, tc.n, counted, total, tc.want, tc.wantTotal)
		}
	}
	if ttl := rdb.PTTL(ctx, l.Keys().TokensCounted("k_once", "req_a")).Val(); ttl <= 0 || ttl > countedRetention {
		t.Errorf("the marker's TTL is %v, want within (0, %v]", ttl, countedRetention)
	}
}
