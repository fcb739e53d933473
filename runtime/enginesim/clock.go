package enginesim

import (
	"context"
	"sync"
	"time"
)

// Clock is the simulator's source of simulated time. Metrics, time to first
// token and step durations are all in this time.
type Clock interface {
	// Now returns the current simulated time.
	Now() time.Time
	// Sleep waits for the simulated duration d, or until ctx ends, when it
	// returns ctx's error.
	Sleep(ctx context.Context, d time.Duration) error
}

// ScaledClock is real time sped up by a factor: simulated durations are
// divided by it when sleeping and real elapsed time is multiplied by it.
type ScaledClock struct {
	origin time.Time
	scale  float64
}

var _ Clock = (*ScaledClock)(nil)

// NewScaledClock returns a clock that runs scale times faster than real
// time, starting at the current time.
func NewScaledClock(scale float64) *ScaledClock {
	return &ScaledClock{origin: time.Now(), scale: scale}
}

// Now implements Clock.
func (c *ScaledClock) Now() time.Time {
	return c.origin.Add(time.Duration(float64(time.Since(c.origin)) * c.scale))
}

// Sleep implements Clock.
func (c *ScaledClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(time.Duration(float64(d) / c.scale))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// FakeClock is a virtual clock for tests: time moves only when Sleep or
// Advance is called, and Sleep moves it forward by d at once. With it
// Sim.Step runs a step without waiting, and every duration the simulator
// reports is exact.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

var _ Clock = (*FakeClock)(nil)

// NewFakeClock returns a virtual clock at start.
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{now: start} }

// Now implements Clock.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep implements Clock: it advances the clock by d and returns at once.
func (c *FakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
