package nodeproto

import (
	"math/rand/v2"
	"time"
)

// maxShift bounds the exponent: BackoffBase<<6 already exceeds BackoffCap,
// and a larger shift would overflow.
const maxShift = 32

// Backoff is an agent's reconnect schedule. The n-th wait since the last
// reset is drawn uniformly from [0, min(BackoffCap, BackoffBase·2ⁿ)) (full
// jitter), so agents cut off together do not come back in lockstep. A
// server's advice (retry_after, or the cap after a refused token or
// version) replaces the next draw. A Backoff is not safe for concurrent
// use: it belongs to one dial loop.
type Backoff struct {
	rnd     *rand.Rand
	attempt int
	advice  time.Duration
}

// NewBackoff returns a schedule that draws from src; nil means the
// runtime's random source. Tests pass a seeded source.
func NewBackoff(src rand.Source) *Backoff {
	if src == nil {
		src = runtimeSource{}
	}
	return &Backoff{rnd: rand.New(src)}
}

// runtimeSource is math/rand/v2's automatically seeded global source.
type runtimeSource struct{}

func (runtimeSource) Uint64() uint64 { return rand.Uint64() }

// Next returns how long to wait before the next dial and advances the
// schedule. After Advise it returns the advice plus up to RetryAfterJitter.
func (b *Backoff) Next() time.Duration {
	var d time.Duration
	if b.advice > 0 {
		d = b.advice + b.draw(RetryAfterJitter)
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
// advice: min(BackoffCap, BackoffBase·2ⁿ) for the n-th wait since a reset.
func (b *Backoff) Ceiling() time.Duration {
	c := BackoffBase << b.attempt
	if c > BackoffCap || c <= 0 {
		return BackoffCap
	}
	return c
}

// Attempt returns how many waits were drawn since the last reset.
func (b *Backoff) Attempt() int { return b.attempt }

// Advise makes the next wait at least d (capped at MaxAdvice): the
// server's retry_after, or BackoffCap after the server refused the token or
// the version. Of several pieces of advice before Next, the longest holds.
func (b *Backoff) Advise(d time.Duration) {
	d = min(d, MaxAdvice)
	if d > b.advice {
		b.advice = d
	}
}

// Reset starts the schedule again at BackoffBase. Pending advice is kept:
// a server that said "come back later" just before closing a long-lived
// link still means it.
func (b *Backoff) Reset() { b.attempt = 0 }

// ResetIfStable resets the schedule if the link that just ended stayed up
// for at least BackoffResetAfter, and reports whether it did. A link that
// flaps keeps backing off.
func (b *Backoff) ResetIfStable(upFor time.Duration) bool {
	if upFor < BackoffResetAfter {
		return false
	}
	b.Reset()
	return true
}

// draw returns a uniform duration in [0, ceil).
func (b *Backoff) draw(ceil time.Duration) time.Duration {
	return time.Duration(b.rnd.Int64N(int64(ceil)))
}
