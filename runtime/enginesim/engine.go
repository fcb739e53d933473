package enginesim

import (
	"context"
	"errors"
	"time"
)

// maxCatchUp bounds how far behind schedule the engine loop may fall and
// still make it up with shorter sleeps: small lags (timer slack, the work
// of a step) are absorbed so simulated time does not drift, but a long
// stall (a GC pause, an overloaded test machine) is not replayed as a burst
// of back-to-back steps.
const maxCatchUp = 200 * time.Millisecond

// ErrAlreadyRunning is returned by Run when the simulator already runs.
var ErrAlreadyRunning = errors.New("enginesim: already running")

// Run loads the model (Config.LoadTime, simulated), then runs the engine
// loop until ctx ends: each step is planned, slept for its simulated
// duration, then committed. When Run returns, every in-flight request has
// been failed and no new one is accepted. It returns nil when ctx ends.
func (s *Sim) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer s.life.stop()
	defer s.sched.stop()
	if s.cfg.LoadTime > 0 {
		if s.clock.Sleep(ctx, s.cfg.LoadTime) != nil {
			return nil
		}
		s.loaded.Store(true)
	}
	var next time.Time // when the running step ends; zero while idle
	for {
		d, ok := s.sched.plan()
		if !ok {
			next = time.Time{}
			select {
			case <-ctx.Done():
				return nil
			case <-s.sched.wake:
				continue
			}
		}
		now := s.clock.Now()
		if next.IsZero() || now.Sub(next) > maxCatchUp {
			next = now
		}
		next = next.Add(d)
		if s.clock.Sleep(ctx, next.Sub(now)) != nil {
			return nil
		}
		s.sched.commit(next)
	}
}

// Step runs one engine step now, for tests that drive the engine instead of
// Run: it plans, sleeps the step's simulated duration on the clock (a
// FakeClock returns at once) and commits. It returns the step's duration,
// and false when there was nothing to do or Run has started (the engine
// loop is Run's alone then).
func (s *Sim) Step(ctx context.Context) (time.Duration, bool) {
	if s.started.Load() {
		return 0, false
	}
	d, ok := s.sched.plan()
	if !ok {
		return 0, false
	}
	if s.clock.Sleep(ctx, d) != nil {
		return 0, false
	}
	s.sched.commit(s.clock.Now())
	return d, true
}
