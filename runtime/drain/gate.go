package drain

import (
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Gate is a process's health as its load balancer's health check sees it:
// serving until Drain is called, draining from then on.
type Gate struct {
	clock    clock.Clock
	draining atomic.Bool
}

// NewGate returns a serving gate whose waits run on clk (nil: the real
// clock).
func NewGate(clk clock.Clock) *Gate {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Gate{clock: clk}
}

// Draining reports whether Drain has been called.
func (g *Gate) Draining() bool { return g.draining.Load() }

// Drain fails the health check from now on and returns after delay on the
// gate's clock, during which the caller keeps serving; a delay of zero or
// less returns at once. Calling it again fails nothing more and waits its
// own delay.
func (g *Gate) Drain(delay time.Duration) {
	if delay <= 0 {
		g.draining.Store(true)
		return
	}
	// The timer before the flag: once the health check fails, the wait is
	// already on the clock (a fake clock's test steps it from then on).
	t := g.clock.NewTimer(delay)
	defer t.Stop()
	g.draining.Store(true)
	<-t.C()
}

// ServeHTTP answers a health check: 200 while serving, 503 once draining.
// The body says which, for a human with curl.
func (g *Gate) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if g.Draining() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("draining\n"))
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

var _ http.Handler = (*Gate)(nil)
