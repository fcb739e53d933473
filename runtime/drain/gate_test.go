package drain_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/drain"
	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestMain(m *testing.M) { testenv.MainWithLeakCheck(m) }

// health is the gate's answer to a health check.
func health(g *drain.Gate) int {
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return rec.Code
}

// TestDrainFailsHealthThenWaits: a serving gate answers 200; Drain fails
// the health check at once and returns only when its delay has passed on
// the gate's clock, not before.
func TestDrainFailsHealthThenWaits(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	g := drain.NewGate(clk)
	if got := health(g); got != http.StatusOK {
		t.Fatalf("health before Drain = %d, want 200", got)
	}
	const delay = 2 * time.Minute
	done := make(chan struct{})
	go func() { defer close(done); g.Drain(delay) }()
	testenv.Eventually(t, "the health check fails once Drain is called", func() bool { return health(g) == http.StatusServiceUnavailable })
	clk.Step(delay - time.Second)
	select {
	case <-done:
		t.Fatal("Drain returned before its delay")
	default:
	}
	clk.Step(time.Second)
	testenv.Eventually(t, "Drain returns once its delay has passed", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	if got := health(g); got != http.StatusServiceUnavailable {
		t.Errorf("health after Drain = %d, want 503 (a drained process never serves health again)", got)
	}
}

// TestDrainWithoutDelay: a zero delay (the local mode, tests) fails the
// health check and returns at once.
func TestDrainWithoutDelay(t *testing.T) {
	g := drain.NewGate(nil)
	g.Drain(0)
	if got := health(g); got != http.StatusServiceUnavailable {
		t.Errorf("health = %d, want 503", got)
	}
}
