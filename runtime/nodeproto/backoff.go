package nodeproto

import (
	"math/rand/v2"

	"github.com/llmplat/llmplat/runtime/backoff"
)

// ReconnectSchedule is an agent's reconnect schedule: the n-th wait since
// the last reset is drawn uniformly from [0, min(BackoffCap,
// BackoffBase·2ⁿ)), a reset waits until a link stayed up for
// BackoffResetAfter, and a server's advice (retry_after, or the cap after a
// refused token or version) replaces the next draw, plus up to
// RetryAfterJitter and capped at MaxAdvice.
var ReconnectSchedule = backoff.Schedule{
	Base:         BackoffBase,
	Cap:          BackoffCap,
	ResetAfter:   BackoffResetAfter,
	AdviceJitter: RetryAfterJitter,
	MaxAdvice:    MaxAdvice,
}

// NewBackoff returns an agent's reconnect schedule drawing from src; nil
// means the runtime's random source. Tests pass a seeded source.
func NewBackoff(src rand.Source) *backoff.Backoff {
	return backoff.New(ReconnectSchedule, src)
}
