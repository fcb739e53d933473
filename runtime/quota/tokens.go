package quota

import (
	"context"
	"fmt"
	"time"
)

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
	now := l.cfg.Clock.Now()
	ttl := dayStart(now).Add(tokensDayRetention).Sub(now)
	v, err := countTokensScript.Run(ctx, l.rdb,
		[]string{l.keys.TokensPerDay(keyID, now), l.keys.TokensCounted(keyID, requestID)},
		n, millis(ttl), millis(countedRetention)).Int64Slice()
	if err != nil {
		return false, fmt.Errorf("count tokens per day: %w", err)
	}
	return len(v) == 2 && v[0] == 1, nil
}
