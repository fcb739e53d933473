package coldstart

import (
	"context"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
	testingclock "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { testenv.MainWithLeakCheck(m) }

func newBoard(t *testing.T) (*Board, *testingclock.FakeClock) {
	t.Helper()
	env := testenv.Redis(t)
	c := testingclock.NewFakeClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	b, err := New(env.Client(), env.Prefix, c)
	if err != nil {
		t.Fatal(err)
	}
	return b, c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRetryAfterFollowsTheWake: the first refusal advises the whole
// expected load; later ones the load less what the wake has run; past the
// expected load, MinRetryAfter.
func TestRetryAfterFollowsTheWake(t *testing.T) {
	b, c := newBoard(t)
	ctx := context.Background()
	const load = 12 * time.Minute
	for _, step := range []struct {
		name    string
		advance time.Duration
		want    time.Duration
	}{
		{"first caller", 0, load},
		{"four minutes in", 4 * time.Minute, 8 * time.Minute},
		{"eleven minutes in", 7 * time.Minute, time.Minute},
		{"past the expected load", 2 * time.Minute, MinRetryAfter},
	} {
		t.Run(step.name, func(t *testing.T) {
			c.Step(step.advance)
			must(t, b.Publish(ctx, "orch-1", "llama-70b", Zero, load))
			got, zero, err := b.Refuse(ctx, "llama-70b", "req-"+step.name)
			must(t, err)
			if !zero || got != step.want {
				t.Errorf("Refuse = %v, at zero %v; want %v, true", got, zero, step.want)
			}
		})
	}
}

// TestAtZero: a model is at zero only while a fresh state says so and no
// fresh state says it is ready.
func TestAtZero(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		publish func(b *Board, c *testingclock.FakeClock)
		want    bool
	}{
		{"nothing published", func(*Board, *testingclock.FakeClock) {}, false},
		{"one replica says zero", func(b *Board, _ *testingclock.FakeClock) { must(t, b.Publish(ctx, "orch-1", "m", Zero, 0)) }, true},
		{"a ready replica wins", func(b *Board, _ *testingclock.FakeClock) {
			must(t, b.Publish(ctx, "orch-1", "m", Zero, 0))
			must(t, b.Publish(ctx, "orch-2", "m", Ready, 0))
		}, false},
		{"a stale ready does not", func(b *Board, c *testingclock.FakeClock) {
			must(t, b.Publish(ctx, "orch-2", "m", Ready, 0))
			c.Step(StateTTL + time.Second)
			must(t, b.Publish(ctx, "orch-1", "m", Zero, 0))
		}, true},
		{"an unsure replica wins", func(b *Board, _ *testingclock.FakeClock) {
			must(t, b.Publish(ctx, "orch-1", "m", Zero, 0))
			must(t, b.Publish(ctx, "orch-2", "m", Unsure, 0))
		}, false},
		{"a stale zero is nobody's word", func(b *Board, c *testingclock.FakeClock) {
			must(t, b.Publish(ctx, "orch-1", "m", Zero, 0))
			c.Step(StateTTL + time.Second)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, c := newBoard(t)
			tc.publish(b, c)
			probed, err := b.AtZero(ctx, "m")
			must(t, err)
			if held, err := b.Held(ctx, "m"); err != nil || held != 0 {
				t.Errorf("AtZero held %d callers (%v), want none", held, err)
			}
			retry, got, err := b.Refuse(ctx, "m", "r1")
			must(t, err)
			if probed != got {
				t.Errorf("AtZero %v, Refuse %v: they disagree", probed, got)
			}
			if got != tc.want {
				t.Errorf("at zero = %v, want %v", got, tc.want)
			}
			if got && retry != DefaultExpectedLoad {
				t.Errorf("Retry-After %v, want the default load %v", retry, DefaultExpectedLoad)
			}
		})
	}
}

// TestHeldUntilReady: a refused caller counts as demand until a replica
// publishes the model ready, or until its hold passes.
func TestHeldUntilReady(t *testing.T) {
	ctx := context.Background()
	const load = 10 * time.Minute
	held := func(t *testing.T, b *Board) int64 {
		t.Helper()
		n, err := b.Held(ctx, "m")
		must(t, err)
		return n
	}
	t.Run("ready", func(t *testing.T) {
		b, c := newBoard(t)
		must(t, b.Publish(ctx, "orch-1", "m", Zero, load))
		for _, id := range []string{"r1", "r2"} {
			if _, zero, err := b.Refuse(ctx, "m", id); err != nil || !zero {
				t.Fatalf("Refuse: %v, %v", zero, err)
			}
		}
		c.Step(load - time.Second)
		must(t, b.Publish(ctx, "orch-1", "m", Zero, load))
		if got := held(t, b); got != 2 {
			t.Errorf("held %d while the replica loads, want 2", got)
		}
		must(t, b.Publish(ctx, "orch-1", "m", Ready, load))
		if got := held(t, b); got != 0 {
			t.Errorf("held %d once a replica is ready, want 0", got)
		}
	})
	t.Run("hold passes", func(t *testing.T) {
		b, c := newBoard(t)
		must(t, b.Publish(ctx, "orch-1", "m", Zero, load))
		if _, _, err := b.Refuse(ctx, "m", "r1"); err != nil {
			t.Fatal(err)
		}
		c.Step(load + HoldMargin - time.Second)
		if got := held(t, b); got != 1 {
			t.Errorf("held %d just before the hold passes, want 1", got)
		}
		c.Step(2 * time.Second)
		if got := held(t, b); got != 0 {
			t.Errorf("held %d after the hold passed, want 0", got)
		}
	})
}
