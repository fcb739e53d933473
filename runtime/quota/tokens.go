package quota

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// TokenDecision is the outcome of CheckTokens.
type TokenDecision struct {
	// Allowed reports whether the key has tokens left today.
	Allowed bool
	// Remaining is the day's tokens left (x-ratelimit-remaining-tokens).
	Remaining int64
	// RetryAfter, set only when refused, is the time until the next UTC
	// midnight, when the day's counter starts again.
	RetryAfter time.Duration
}

// CheckTokens reports whether keyID has used fewer than limit tokens on the
// current UTC day. It reads one counter and writes nothing; tokens are
// counted by AddTokens when a request settles.
func (l *Limiter) CheckTokens(ctx context.Context, keyID string, limit int64) (TokenDecision, error) {
	if err := checkName("key id", keyID); err != nil {
		return TokenDecision{}, err
	}
	if err := checkLimit("tokens per day", limit); err != nil {
		return TokenDecision{}, err
	}
	now := l.cfg.Now().UTC()
	used, err := l.rdb.Get(ctx, l.keys.TokensPerDay(keyID, now)).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return TokenDecision{}, fmt.Errorf("read tokens per day: %w", err)
	}
	if used >= limit {
		return TokenDecision{RetryAfter: dayStart(now).Add(24 * time.Hour).Sub(now)}, nil
	}
	return TokenDecision{Allowed: true, Remaining: limit - used}, nil
}

// AddTokens adds n tokens to keyID's counter for the current UTC day.
//
// It is not idempotent: the caller calls it exactly once per settled
// request, from the one settle call that actually moved the ledger row
// (ledger Settle's applied == true), so a retried settle never counts twice.
// n may be negative, to take back an estimate counted at admission.
func (l *Limiter) AddTokens(ctx context.Context, keyID string, n int64) error {
	return l.AddTokensOn(ctx, keyID, l.cfg.Now(), n)
}

// AddTokensOn is AddTokens for the UTC day of day, for a caller that
// adjusts the day a request was admitted on. The same exactly-once rule
// applies.
func (l *Limiter) AddTokensOn(ctx context.Context, keyID string, day time.Time, n int64) error {
	if err := checkName("key id", keyID); err != nil {
		return err
	}
	// The TTL is relative to the injected clock, so it is right even when
	// that clock is not the server's.
	ttl := dayStart(day).Add(tokensDayRetention).Sub(l.cfg.Now())
	if ttl < time.Millisecond {
		return nil // the day's counter is past its retention: nothing reads it
	}
	err := addTokensScript.Run(ctx, l.rdb, []string{l.keys.TokensPerDay(keyID, day)}, n, millis(ttl)).Err()
	if err != nil {
		return fmt.Errorf("add tokens per day: %w", err)
	}
	return nil
}

// dayStart returns the UTC midnight that starts t's UTC day.
func dayStart(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// countedRetention is how long a request's counted marker lives: longer
// than any second settle of it can come (the gateway's retries take
// seconds, the sweeper settles rows within an hour of their reservation).
const countedRetention = 2 * time.Hour

// CountTokens adds a settled request's n tokens to keyID's counter for the
// current UTC day once per request id: whoever settles the request — the
// gateway, its retry after a lost commit acknowledgement, the sweeper —
// may call it, and only the first call counts. It reports whether this
// call counted.
func (l *Limiter) CountTokens(ctx context.Context, keyID, requestID string, n int64) (bool, error) {
	if err := checkName("key id", keyID); err != nil {
		return false, err
	}
	if err := checkName("request id", requestID); err != nil {
		return false, err
	}
	now := l.cfg.Now()
	ttl := dayStart(now).Add(tokensDayRetention).Sub(now)
	v, err := countTokensScript.Run(ctx, l.rdb,
		[]string{l.keys.TokensPerDay(keyID, now), l.keys.TokensCounted(keyID, requestID)},
		n, millis(ttl), millis(countedRetention)).Int64Slice()
	if err != nil {
		return false, fmt.Errorf("count tokens per day: %w", err)
	}
	return len(v) == 2 && v[0] == 1, nil
}
