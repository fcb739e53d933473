package routing

import (
	"math/rand/v2"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestTrackerReleasedMatchesACount: Fill's released tokens, kept as a
// running sum, equal a count over the remembered releases for any order of
// assignments, releases, heartbeats (new or repeated, recent or old) and
// the passing of time past the retention.
func TestTrackerReleasedMatchesACount(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	clk := testingclock.NewFakePassiveClock(time.Unix(1_000_000, 0))
	now := clk.Now()
	tr := NewTrackerWithClock(clk)
	var open []func()
	beat := now
	for step := range 20000 {
		switch k := rng.IntN(10); {
		case k < 4:
			open = append(open, tr.Assign("n", rng.Int64N(5000)+1, now))
		case k < 7 && len(open) > 0:
			i := rng.IntN(len(open))
			open[i]()
			open = append(open[:i], open[i+1:]...)
		case k == 7:
			beat = now.Add(-time.Duration(rng.IntN(20000)) * time.Millisecond)
		default:
			c := Candidate{NodeID: "n"}
			tr.Fill(&c, beat)
			var want int64
			if r := tr.released["n"]; r != nil {
				for _, a := range r.list {
					if !a.at.After(beat) && a.done.After(beat) {
						want += a.tokens
					}
				}
			}
			if c.ReleasedTokens != want {
				t.Fatalf("step %d: released %d, counted %d", step, c.ReleasedTokens, want)
			}
		}
		now = now.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
		clk.SetTime(now)
	}
}
