package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

// seeded returns a deterministic source; the tests assert ranges and
// ceilings, which hold for any source (the node protocol's tests pin the
// top and bottom of each draw for the agent's schedule).
func seeded(i uint64) rand.Source { return rand.NewPCG(i, 42) }

// short is a schedule other than the agent's, so the tests show the
// numbers come from the Schedule and not from constants.
var short = Schedule{Base: 100 * time.Millisecond, Cap: time.Second, ResetAfter: 5 * time.Second, MaxAdvice: 10 * time.Second}

func TestScheduleCeilings(t *testing.T) {
	b := New(short, seeded(1))
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i, w := range want {
		w *= time.Millisecond
		if got := b.Ceiling(); got != w {
			t.Fatalf("ceiling %d = %v, want %v", i, got, w)
		}
		if got := b.Next(); got < 0 || got >= w {
			t.Fatalf("wait %d = %v, outside [0, %v)", i, got, w)
		}
	}
}

func TestLongRunDoesNotOverflow(t *testing.T) {
	b := New(short, seeded(2))
	for range 10 * maxShift {
		if got := b.Next(); got < 0 || got >= short.Cap {
			t.Fatalf("wait = %v, outside [0, %v)", got, short.Cap)
		}
	}
	if got := b.Ceiling(); got != short.Cap {
		t.Errorf("ceiling = %v, want %v", got, short.Cap)
	}
}

func TestResetIfStable(t *testing.T) {
	tests := []struct {
		name      string
		upFor     time.Duration
		wantReset bool
	}{
		{name: "flapping link keeps backing off", upFor: short.ResetAfter - time.Millisecond},
		{name: "stable link resets", upFor: short.ResetAfter, wantReset: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(short, seeded(3))
			b.Next()
			b.Next()
			if got := b.ResetIfStable(tt.upFor); got != tt.wantReset {
				t.Errorf("ResetIfStable = %v, want %v", got, tt.wantReset)
			}
			wantAttempt := 2
			if tt.wantReset {
				wantAttempt = 0
			}
			if got := b.Attempt(); got != wantAttempt {
				t.Errorf("attempt = %d, want %d", got, wantAttempt)
			}
		})
	}
}

func TestAdvice(t *testing.T) {
	tests := []struct {
		name     string
		s        Schedule
		advice   []time.Duration
		from, to time.Duration // the wait lies in [from, to]
	}{
		{name: "advice replaces the draw", s: short, advice: []time.Duration{3 * time.Second}, from: 3 * time.Second, to: 3 * time.Second},
		{name: "the longest advice holds", s: short, advice: []time.Duration{500 * time.Millisecond, 2 * time.Second, time.Second}, from: 2 * time.Second, to: 2 * time.Second},
		{name: "no MaxAdvice caps at Cap", s: Schedule{Base: time.Second, Cap: 10 * time.Second}, advice: []time.Duration{time.Hour}, from: 10 * time.Second, to: 10 * time.Second},
		{name: "MaxAdvice caps advice", s: Schedule{Base: time.Second, Cap: 10 * time.Second, MaxAdvice: time.Minute}, advice: []time.Duration{time.Hour}, from: time.Minute, to: time.Minute},
		{name: "advice jitter is drawn on top", s: Schedule{Base: time.Second, Cap: 10 * time.Second, AdviceJitter: time.Second}, advice: []time.Duration{5 * time.Second}, from: 5 * time.Second, to: 6*time.Second - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(tt.s, seeded(4))
			for _, d := range tt.advice {
				b.Advise(d)
			}
			if got := b.Next(); got < tt.from || got > tt.to {
				t.Errorf("Next after advice = %v, want it in [%v, %v]", got, tt.from, tt.to)
			}
			if got, want := b.Ceiling(), 2*tt.s.Base; got != want {
				t.Errorf("ceiling after that = %v, want %v: advice is one-shot and the schedule went on", got, want)
			}
		})
	}
}

func TestCapBelowBaseIsBase(t *testing.T) {
	b := New(Schedule{Base: time.Second, Cap: time.Millisecond}, seeded(5))
	if got := b.Ceiling(); got != time.Second {
		t.Errorf("ceiling = %v, want %v", got, time.Second)
	}
}

func TestDefaultSourceJitters(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 20 {
		d := New(short, nil).Next()
		if d < 0 || d >= short.Base {
			t.Fatalf("Next = %v, outside [0, %v)", d, short.Base)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 draws from the runtime source gave %d distinct waits", len(seen))
	}
}
