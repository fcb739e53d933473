package nodeproto

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// fixedSource returns the same value forever. Under math/rand/v2's
// multiply-shift mapping, math.MaxUint64 makes every draw the top of its
// range (ceiling − 1 ns) and 1 the bottom (0); a source of 0 would spin in
// the mapping's rejection loop.
type fixedSource uint64

func (s fixedSource) Uint64() uint64 { return uint64(s) }

const (
	topSource    = fixedSource(math.MaxUint64)
	bottomSource = fixedSource(1)
)

// ceilingAt is the schedule docs/requirements.md asks for: 1 s, 2 s, 4 s, … capped at 60 s.
func ceilingAt(n int) time.Duration {
	if n >= 6 {
		return 60 * time.Second
	}
	return time.Second << n
}

func TestBackoffScheduleEdges(t *testing.T) {
	top, bottom := NewBackoff(topSource), NewBackoff(bottomSource)
	for n := range 12 {
		t.Run(fmt.Sprintf("attempt %d", n), func(t *testing.T) {
			if got, want := top.Ceiling(), ceilingAt(n); got != want {
				t.Errorf("Ceiling = %v, want %v", got, want)
			}
			if got, want := top.Next(), ceilingAt(n)-1; got != want {
				t.Errorf("Next at the top of the range = %v, want %v", got, want)
			}
			if got := bottom.Next(); got != 0 {
				t.Errorf("Next at the bottom of the range = %v, want 0", got)
			}
		})
	}
}

// TestBackoffSeededBounds draws from seeded sources and checks every wait
// lies in [0, ceiling) and that the draws use the whole range.
func TestBackoffSeededBounds(t *testing.T) {
	const agents = 200
	for n := range 10 {
		t.Run(fmt.Sprintf("attempt %d", n), func(t *testing.T) {
			var lo, hi time.Duration = math.MaxInt64, 0
			for a := range agents {
				b := NewBackoff(rand.NewPCG(uint64(a), 42))
				for range n {
					b.Next()
				}
				d := b.Next()
				if d < 0 || d >= ceilingAt(n) {
					t.Fatalf("agent %d: Next = %v, outside [0, %v)", a, d, ceilingAt(n))
				}
				lo, hi = min(lo, d), max(hi, d)
			}
			if lo > ceilingAt(n)/10 || hi < ceilingAt(n)*9/10 {
				t.Errorf("%d draws span [%v, %v], want most of [0, %v)", agents, lo, hi, ceilingAt(n))
			}
		})
	}
}

func TestBackoffCapHoldsForever(t *testing.T) {
	b := NewBackoff(topSource)
	for i := range 1000 {
		if d := b.Next(); d >= BackoffCap || d < 0 {
			t.Fatalf("attempt %d: Next = %v, want below the %v cap", i, d, BackoffCap)
		}
	}
	if got := b.Ceiling(); got != BackoffCap {
		t.Errorf("Ceiling after 1000 attempts = %v, want %v", got, BackoffCap)
	}
}

func TestBackoffResetIfStable(t *testing.T) {
	tests := []struct {
		name      string
		upFor     time.Duration
		wantReset bool
	}{
		{"dial failed", 0, false},
		{"flapped after 5 s", 5 * time.Second, false},
		{"just short", BackoffResetAfter - time.Millisecond, false},
		{"exactly the threshold", BackoffResetAfter, true},
		{"up for an hour", time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBackoff(topSource)
			for range 5 {
				b.Next()
			}
			if got := b.ResetIfStable(tt.upFor); got != tt.wantReset {
				t.Errorf("ResetIfStable = %v, want %v", got, tt.wantReset)
			}
			want := ceilingAt(5) - 1
			if tt.wantReset {
				want = BackoffBase - 1
			}
			if got := b.Next(); got != want {
				t.Errorf("Next = %v, want %v", got, want)
			}
		})
	}
}

// TestBackoffFlappingLinkKeepsBackingOff connects and drops every 5 s: the
// waits must still climb to the cap.
func TestBackoffFlappingLinkKeepsBackingOff(t *testing.T) {
	b := NewBackoff(topSource)
	var last time.Duration
	for range 10 {
		last = b.Next()
		b.ResetIfStable(5 * time.Second)
	}
	if want := BackoffCap - 1; last != want {
		t.Errorf("wait after 10 flaps = %v, want %v", last, want)
	}
}

func TestBackoffAdvise(t *testing.T) {
	tests := []struct {
		name   string
		src    fixedSource
		advise []time.Duration
		reset  bool
		want   time.Duration
	}{
		{"retry_after at the bottom of its jitter", bottomSource, []time.Duration{7 * time.Second}, false, 7 * time.Second},
		{"retry_after at the top of its jitter", topSource, []time.Duration{7 * time.Second}, false, 7*time.Second + RetryAfterJitter - 1},
		{"retry_after beyond the draw", topSource, []time.Duration{90 * time.Second}, false, 90*time.Second + RetryAfterJitter - 1},
		{"longest advice holds", bottomSource, []time.Duration{3 * time.Second, 7 * time.Second, 2 * time.Second}, false, 7 * time.Second},
		{"zero advice is ignored", topSource, []time.Duration{0}, false, BackoffBase - 1},
		{"negative advice is ignored", topSource, []time.Duration{-time.Second}, false, BackoffBase - 1},
		{"advice is capped", bottomSource, []time.Duration{time.Hour}, false, MaxAdvice},
		{"advice survives a reset", bottomSource, []time.Duration{7 * time.Second}, true, 7 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBackoff(tt.src)
			for _, d := range tt.advise {
				b.Advise(d)
			}
			if tt.reset && !b.ResetIfStable(time.Hour) {
				t.Fatal("ResetIfStable did not reset")
			}
			if got := b.Next(); got != tt.want {
				t.Errorf("Next = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBackoffAdviceIsOneShot proves the schedule resumes after advice, one
// attempt further on.
func TestBackoffAdviceIsOneShot(t *testing.T) {
	b := NewBackoff(topSource)
	b.Advise(7 * time.Second)
	b.Next()
	if got, want := b.Next(), ceilingAt(1)-1; got != want {
		t.Errorf("Next after the advised wait = %v, want %v", got, want)
	}
}

// spreadProblem describes how waits fail to spread over [0, window), or
// returns "": every wait inside the window, each tenth of the window within
// ±40 % of its fair share, and no 1 % slot holding more than 3× its share.
func spreadProblem(waits []time.Duration, window time.Duration) string {
	var tenths [10]int
	var slots [100]int
	for _, d := range waits {
		if d < 0 || d >= window {
			return fmt.Sprintf("wait %v outside [0, %v)", d, window)
		}
		tenths[int(d*10/window)]++
		slots[int(d*100/window)]++
	}
	share := len(waits) / 10
	for i, n := range tenths {
		if n < share*6/10 || n > share*14/10 {
			return fmt.Sprintf("tenth %d holds %d waits, fair share %d", i, n, share)
		}
	}
	for i, n := range slots {
		if n > 3*len(waits)/100 {
			return fmt.Sprintf("slot %d (%v wide) holds %d of %d waits", i, window/100, n, len(waits))
		}
	}
	return ""
}

// TestReconnectStormSpreads restarts 1,000 agents at once: their first
// reconnects must spread evenly over the first backoff window instead of
// arriving in lockstep.
func TestReconnectStormSpreads(t *testing.T) {
	const agents = 1000
	waits := make([]time.Duration, agents)
	for i := range waits {
		waits[i] = NewBackoff(rand.NewPCG(uint64(i), uint64(i)*7919)).Next()
	}
	if p := spreadProblem(waits, BackoffBase); p != "" {
		t.Errorf("1,000 first reconnects do not spread: %s", p)
	}
}

// TestSpreadProblemCatchesLockstep proves the spread check fails agents
// without jitter, so the storm test can fail.
func TestSpreadProblemCatchesLockstep(t *testing.T) {
	tests := []struct {
		name  string
		waits func(i int) time.Duration
	}{
		{"no jitter", func(int) time.Duration { return 500 * time.Millisecond }},
		{"half the window", func(i int) time.Duration { return time.Duration(i%500) * time.Millisecond }},
		{"clustered in slots", func(i int) time.Duration { return time.Duration(i%20) * 50 * time.Millisecond }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waits := make([]time.Duration, 1000)
			for i := range waits {
				waits[i] = tt.waits(i)
			}
			if p := spreadProblem(waits, time.Second); p == "" {
				t.Error("spreadProblem found no problem with lockstep waits")
			}
		})
	}
}

// TestBackoffDefaultSource proves a nil source still jitters.
func TestBackoffDefaultSource(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 20 {
		d := NewBackoff(nil).Next()
		if d < 0 || d >= BackoffBase {
			t.Fatalf("Next = %v, outside [0, %v)", d, BackoffBase)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 agents with the default source drew %d distinct waits", len(seen))
	}
}
