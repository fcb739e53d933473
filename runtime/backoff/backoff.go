package backoff

import (
	"math/rand/v2"
	"time"
)

// maxShift bounds the exponent: past it Base<<n overflows, and every
// schedule reaches its Cap long before.
const maxShift = 32

// Schedule is the shape of a Backoff.
type Schedule struct {
	// Base is the first ceiling of the full-jitter draw. Required.
	Base time.Duration
	// Cap caps the ceiling; below Base it is Base.
	Cap time.Duration
	// ResetAfter is how long a connection must stay up before
	// ResetIfStable starts the schedule again; zero resets always.
	ResetAfter time.Duration
	// AdviceJitter is the most drawn on top of advice, so clients told the
	// same wait do not return in the same instant; zero adds none.
	AdviceJitter time.Duration
	// MaxAdvice caps advice; zero means Cap.
	MaxAdvice time.Duration
}

// Backoff is one retry loop's schedule. It is not safe for concurrent use:
// it belongs to the loop.
type Backoff struct {
	s       Schedule
	rnd     *rand.Rand
	attempt int
	advice  time.Duration
}

// New returns a Backoff with schedule s that draws from src; nil means the
// runtime's random source. Tests pass a seeded source.
func New(s Schedule, src rand.Source) *Backoff {
	s.Cap = max(s.Cap, s.Base)
	if s.MaxAdvice <= 0 {
		s.MaxAdvice = s.Cap
	}
	if src == nil {
		src = runtimeSource{}
	}
	return &Backoff{s: s, rnd: rand.New(src)}
}

// runtimeSource is math/rand/v2's automatically seeded global source.
type runtimeSource struct{}

func (runtimeSource) Uint64() uint64 { return rand.Uint64() }

// Next returns how long to wait before the next try and advances the
// schedule. After Advise it returns the advice plus up to AdviceJitter.
func (b *Backoff) Next() time.Duration {
	var d time.Duration
	if b.advice > 0 {
		d = b.advice + b.draw(b.s.AdviceJitter)
		b.advice = 0
	} else {
		d = b.draw(b.Ceiling())
	}
	if b.attempt < maxShift {
		b.attempt++
	}
	return d
}

// Ceiling returns the exclusive upper bound of the next draw without
// advice: min(Cap, Base·2ⁿ) for the n-th wait since a reset.
func (b *Backoff) Ceiling() time.Duration {
	c := b.s.Base << b.attempt
	if c > b.s.Cap || c <= 0 {
		return b.s.Cap
	}
	return c
}

// Attempt returns how many waits were drawn since the last reset.
func (b *Backoff) Attempt() int { return b.attempt }

// Advise makes the next wait at least d (capped at MaxAdvice): the other
// side's retry-after. Of several pieces of advice before Next, the longest
// holds.
func (b *Backoff) Advise(d time.Duration) {
	d = min(d, b.s.MaxAdvice)
	if d > b.advice {
		b.advice = d
	}
}

// Reset starts the schedule again at Base. Pending advice is kept: a
// server that said "come back later" just before closing a long-lived
// connection still means it.
func (b *Backoff) Reset() { b.attempt = 0 }

// ResetIfStable resets the schedule if the connection that just ended
// stayed up for at least ResetAfter, and reports whether it did.
func (b *Backoff) ResetIfStable(upFor time.Duration) bool {
	if upFor < b.s.ResetAfter {
		return false
	}
	b.Reset()
	return true
}

// draw returns a uniform duration in [0, ceil), or 0 when ceil is not
// positive.
func (b *Backoff) draw(ceil time.Duration) time.Duration {
	if ceil <= 0 {
		return 0
	}
	return time.Duration(b.rnd.Int64N(int64(ceil)))
}
