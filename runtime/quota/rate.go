package quota

import (
	"context"
	"fmt"
	"time"
)

// RateDecision is the outcome of AllowRequest.
type RateDecision struct {
	// Allowed reports whether the request was counted.
	Allowed bool
	// Remaining is how many more requests the window admits now
	// (x-ratelimit-remaining-requests); 0 when refused.
	Remaining int
	// RetryAfter, set only when refused, is exactly when the oldest counted
	// request leaves the window; never zero on a refusal.
	RetryAfter time.Duration
}

// AllowRequest counts one request of keyID against rpm requests per
// minute, unless that many were admitted in the last 60 s.
//
// The window is a sliding log: a sorted set of the admitted requests'
// server times (each member unique), trimmed on every call. It is exact:
// in no 60 s span, across any number of gateway replicas, are more than
// rpm requests admitted, and RetryAfter is the moment a slot frees, not a
// guess. The alternative, a two-bucket sliding-window counter, costs O(1)
// memory but only approximates the window, admitting more than rpm in some
// 60 s spans when traffic is bursty, which is exactly what a quota under
// attack must not do. The log's memory is O(rpm) per key, bounded by the
// key's own limit. A refused request is not recorded and consumes nothing.
func (l *Limiter) AllowRequest(ctx context.Context, keyID string, rpm int) (RateDecision, error) {
	if err := checkName("key id", keyID); err != nil {
		return RateDecision{}, err
	}
	if err := checkLimit("rpm", int64(rpm)); err != nil {
		return RateDecision{}, err
	}
	cmd := allowRequestScript.Run(ctx, l.rdb, []string{l.keys.RPM(keyID)},
		rpm, millis(l.window), l.member())
	r, err := ints(cmd, 3)
	if err != nil {
		return RateDecision{}, fmt.Errorf("count request: %w", err)
	}
	d := RateDecision{Allowed: r[0] == 1, Remaining: int(r[1])}
	if !d.Allowed {
		d.RetryAfter = max(time.Duration(r[2])*time.Millisecond, time.Millisecond)
	}
	return d, nil
}
