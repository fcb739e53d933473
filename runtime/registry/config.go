package registry

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// Defaults and fixed limits, each with its reason.
const (
	// DefaultTTL is how long a node record lives without a heartbeat:
	// three missed 5 s heartbeats (docs/requirements.md).
	DefaultTTL = 15 * time.Second
	// DefaultWatchInterval is how often Watch polls nodes:live: a death is
	// reported within TTL + 1 s, the same delay as the router's 1 s refresh
	// of its view, and a poll costs one round trip plus one probe per node
	// whose beat is older than the TTL, so 1,000 nodes cost nothing.
	DefaultWatchInterval = time.Second
	// HealthyWithin is how recent a node's last beat must be for Healthy:
	// two 5 s heartbeat intervals (docs/requirements.md: a node leaves
	// routing after 2 missed heartbeats), earlier than the record's 15 s expiry.
	HealthyWithin = 10 * time.Second
	// MaxRegistrationRetryAfter caps AllowRegistration's retry advice at
	// the agents' own backoff cap (docs/requirements.md: 60 s); a longer wait would hold a
	// node out longer than its own backoff ever would.
	MaxRegistrationRetryAfter = 60 * time.Second

	// epochRetention is how long a node's epoch counter outlives the last
	// registration or heartbeat of the node: far longer than any connection
	// stays silent (its read deadline is 15 s), so no live connection sees
	// its node's epochs restart, while the counters of node ids that never
	// come back (replaced cloud pods) are eventually freed.
	epochRetention = 7 * 24 * time.Hour
	// minTombstoneRetention is the least time a Deregister's tombstone
	// lives: longer than a TTL, a poll and a stalled poll, so every Watch
	// that saw the node alive also sees that it left on purpose.
	minTombstoneRetention = time.Minute
	// regKeyTTL is the life of a reg:{unix_second} counter: its own second
	// plus one for replies still in flight (docs: 2 s).
	regKeyTTL = 2 * time.Second
	// regSecondAttempts bounds AllowRegistration's tries to name the
	// server's current second: a miss happens only when a call straddles
	// a second boundary or the local clock is off, and each miss teaches
	// the offset from the server's reply, so the second try nearly always
	// hits. On a loaded machine round trips vary by tens of milliseconds,
	// and a burst near a boundary missed three tries in a row (1 call in
	// 1,000 under -race); a miss costs only a round trip, so allow eight.
	regSecondAttempts = 8
	// maxNodeIDLen is the longest node id: a DNS name, as cloud node ids
	// are pod names.
	maxNodeIDLen = 253
)

// Config configures a Registry. The zero value of every field but Prefix is
// replaced by its default.
type Config struct {
	// Prefix starts every key and pub/sub channel ("llmplat:"; tests use
	// testenv's per-test prefix). It must not contain '{' or '}', which
	// would take over the keys' cluster hash tags.
	Prefix string
	// TTL is how long a node record lives without a heartbeat. Default
	// DefaultTTL; tests shorten it.
	TTL time.Duration
	// WatchInterval is how often Watch polls for expired records. It must
	// be shorter than TTL, so that Watch sees every record alive before it
	// can expire. Default DefaultWatchInterval.
	WatchInterval time.Duration
	// Clock is the local clock. It only guesses which second the Redis
	// server is in, to name reg:{unix_second} before the script runs (the
	// script checks the guess against TIME), and paces Watch's polls.
	// Default the real clock.
	Clock clock.WithTicker
	// Jitter returns a uniform value in [0, 1) and must be safe for
	// concurrent use. It spreads refused registrations within the second
	// they are sent back to. Default math/rand/v2.Float64.
	Jitter func() float64
	// Logger receives Watch's failed polls. Nil discards.
	Logger *slog.Logger
}

// withDefaults validates c and returns it with its defaults filled.
func (c Config) withDefaults() (Config, error) {
	if strings.ContainsAny(c.Prefix, "{}") {
		return c, fmt.Errorf("registry: prefix %q must not contain braces", c.Prefix)
	}
	if c.TTL < 0 || c.WatchInterval < 0 {
		return c, fmt.Errorf("registry: durations must not be negative")
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < time.Millisecond {
		return c, fmt.Errorf("registry: ttl %v is below the 1 ms resolution", c.TTL)
	}
	if c.WatchInterval == 0 {
		c.WatchInterval = DefaultWatchInterval
	}
	if c.WatchInterval >= c.TTL {
		return c, fmt.Errorf("registry: watch interval %v must be shorter than the ttl %v", c.WatchInterval, c.TTL)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Jitter == nil {
		c.Jitter = rand.Float64
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, nil
}

// tombstoneRetention is how long a Deregister's tombstone lives.
func (c Config) tombstoneRetention() time.Duration {
	return max(minTombstoneRetention, 2*c.TTL)
}
