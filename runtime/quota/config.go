package quota

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// Defaults and fixed intervals, each with its reason.
const (
	// DefaultMaxStreamDuration is the longest a request may hold a stream
	// slot: the platform's maximum request duration (8,192 tokens at the
	// 20 tok/s floor is about 7 min, plus queue and first token).
	DefaultMaxStreamDuration = 10 * time.Minute
	// DefaultQueuePollInterval is how often a queued request looks at the
	// queue without a wake-up: a backstop for a lost pub/sub message or a
	// crashed head, costing one round trip per waiter per second and at
	// most a second of extra wait against the 30 s queue limit.
	DefaultQueuePollInterval = time.Second
	// rateWindow is the span of "requests per minute".
	rateWindow = time.Minute
	// tokensDayRetention is how long a tokens-per-day counter lives from
	// the start of its UTC day: the day itself plus a day of slack for
	// settles of requests admitted just before midnight.
	tokensDayRetention = 48 * time.Hour
	// streamRetryHint caps the Retry-After of a refused stream slot: a slot
	// frees when some stream of the key ends, which nobody can predict; at
	// the reference workload's 8.5 s mean stream a slot of a busy key frees within about
	// a second, and the true bound (the oldest slot's deadline) can be ten
	// minutes away.
	streamRetryHint = time.Second
	// cleanupTimeout bounds the Redis calls quota makes after the caller's
	// context has ended (a queued client that left): like the gateway's
	// stream-slot release, the cleanup must still run, but not forever.
	cleanupTimeout = 2 * time.Second
	// queueHandoff is how long the head of a queue may run its try before
	// the next waiter is woken too. A refusal for lack of capacity is
	// decided in memory in far less; a try still running after this has
	// most likely been admitted and is waiting for its first token, and the
	// queue must not drain at one request per time-to-first-token.
	queueHandoff = 25 * time.Millisecond
	// missedWakeLife is how long a wake-up that found the head out trying
	// waits for it to come back: longer than any try, and at worst it
	// costs one extra try.
	missedWakeLife = 10 * time.Second
	// listenRetryDelay spaces resubscription attempts of a waiter whose
	// pub/sub connection failed, so a Redis outage does not spin a core.
	listenRetryDelay = 100 * time.Millisecond
)

// Config configures a Limiter or a Queue. The zero value of every field
// but Prefix is replaced by its default.
type Config struct {
	// Prefix starts every key and pub/sub channel ("llmplat:"; tests use
	// testenv's per-test prefix), so deployments and tests can share a
	// Redis. It must not contain '{' or '}', which would take over the
	// keys' cluster hash tags.
	Prefix string
	// MaxStreamDuration is the longest a request may hold a stream slot,
	// after which the slot is free whether or not it was released.
	// Default DefaultMaxStreamDuration.
	MaxStreamDuration time.Duration
	// QueuePollInterval is how often a queued request checks the queue when
	// no wake-up arrives. Default DefaultQueuePollInterval.
	QueuePollInterval time.Duration
	// LeaseTTL is how long a gateway replica admits a busy key's requests
	// on tickets it took with an earlier Admit (lease.go). Default
	// DefaultLeaseTTL; it is cut to fit within MaxStreamDuration.
	LeaseTTL time.Duration
	// NoLeases sends every Admit to Redis.
	NoLeases bool
	// Logger reports what goes wrong in the background (a ticket whose
	// claim failed). Default slog.Default().
	Logger *slog.Logger
	// Clock is the Go-side clock. It names the UTC day of a tokens-per-day
	// counter and times Retry-After until midnight (the counter's key must
	// be known before its script runs), and runs the queue's timers.
	// Default the real clock.
	Clock clock.WithDelayedExecution
}

// withDefaults validates c and returns it with its defaults filled.
func (c Config) withDefaults() (Config, error) {
	if strings.ContainsAny(c.Prefix, "{}") {
		return c, fmt.Errorf("quota: prefix %q must not contain braces", c.Prefix)
	}
	if c.MaxStreamDuration < 0 || c.QueuePollInterval < 0 || c.LeaseTTL < 0 {
		return c, fmt.Errorf("quota: durations must not be negative")
	}
	if c.MaxStreamDuration == 0 {
		c.MaxStreamDuration = DefaultMaxStreamDuration
	}
	if c.MaxStreamDuration < time.Millisecond {
		return c, fmt.Errorf("quota: max stream duration %v is below the 1 ms resolution", c.MaxStreamDuration)
	}
	if c.QueuePollInterval == 0 {
		c.QueuePollInterval = DefaultQueuePollInterval
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
