package registry

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errSecondMissed means AllowRegistration never named the server's current
// second in regSecondAttempts tries: the server's clock jumps about.
var errSecondMissed = errors.New("registry: could not name the redis server's current second")

// regDecision is one registration attempt's outcome.
type regDecision struct {
	allowed    bool
	retryAfter time.Duration
	n          int64     // the attempt's number within its second
	serverTime time.Time // the Redis time it was counted at
}

// AllowRegistration counts one registration attempt against perSecond
// attempts in the current second of the Redis server's clock, shared by all
// replicas, and reports whether it may proceed. Refused attempts count too,
// so the later an attempt comes in a storm, the further back it is sent:
// the k-th attempt over the limit gets a retryAfter in the second
// 1 + (k−1)/perSecond seconds after the current one, at a jittered point in
// it, so each later second receives about perSecond of the refused
// attempts. retryAfter is positive on a refusal, 0 when allowed, and never
// more than MaxRegistrationRetryAfter; beyond that the excess wraps around
// within that span.
func (r *Registry) AllowRegistration(ctx context.Context, perSecond int) (bool, time.Duration, error) {
	d, err := r.allowRegistration(ctx, perSecond)
	return d.allowed, d.retryAfter, err
}

// AllowRegistrationAt is AllowRegistration that also returns the Redis
// server's time the attempt was counted at: the second it counts against,
// for a record of admissions that can be checked against the limit.
func (r *Registry) AllowRegistrationAt(ctx context.Context, perSecond int) (bool, time.Duration, time.Time, error) {
	d, err := r.allowRegistration(ctx, perSecond)
	return d.allowed, d.retryAfter, d.serverTime, err
}

// allowRegistration is AllowRegistration with the attempt's details.
func (r *Registry) allowRegistration(ctx context.Context, perSecond int) (regDecision, error) {
	if perSecond <= 0 {
		return regDecision{}, fmt.Errorf("%w: registrations per second = %d", ErrInvalidLimit, perSecond)
	}
	for range regSecondAttempts {
		local := r.cfg.Clock.Now().UnixMilli()
		sec := floorDiv(local+r.offsetMS.Load(), 1000)
		cmd := regAllowScript.Run(ctx, r.rdb, []string{r.keys.Registrations(sec)}, sec, millis(regKeyTTL))
		v, err := ints(cmd, 2)
		if err != nil {
			return regDecision{}, fmt.Errorf("count registration: %w", err)
		}
		n, nowMS := v[0], v[1]
		r.offsetMS.Store(nowMS - local)
		if n < 0 {
			continue
		}
		d := regDecision{allowed: n <= int64(perSecond), n: n, serverTime: time.UnixMilli(nowMS)}
		if !d.allowed {
			d.retryAfter = spreadRetry(n-int64(perSecond), int64(perSecond), nowMS, r.cfg.Jitter())
		}
		return d, nil
	}
	return regDecision{}, errSecondMissed
}

// spreadRetry returns the wait of the over-th refused attempt (1-based) in
// the second that contains nowMS, at perSecond admitted per second: the
// attempts over the limit are sent to the following seconds perSecond at a
// time, each to the point jitter ∈ [0, 1) of its second.
func spreadRetry(over, perSecond, nowMS int64, jitter float64) time.Duration {
	maxSlots := int64(MaxRegistrationRetryAfter/time.Second) - 1
	slot := ((over - 1) / perSecond) % maxSlots
	untilNext := 1000 - nowMS%1000
	ms := untilNext + slot*1000 + int64(jitter*1000)
	return min(time.Duration(max(ms, 1))*time.Millisecond, MaxRegistrationRetryAfter)
}

// floorDiv divides rounding toward minus infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// AllowNodeRegistration admits at most perWindow registrations of one
// node id in each window, counted in Redis so every replica shares the
// count: a node that registers in a loop, with its own valid token,
// spends its own allowance and never the cluster-wide rate that every
// other node needs. A refusal is not counted; its retryAfter is the rest
// of the node's window (positive, at most window).
func (r *Registry) AllowNodeRegistration(ctx context.Context, nodeID string, perWindow int, window time.Duration) (bool, time.Duration, error) {
	if err := checkName("node id", nodeID); err != nil {
		return false, 0, err
	}
	if perWindow <= 0 || window < time.Millisecond {
		return false, 0, fmt.Errorf("%w: %d registrations per %v", ErrInvalidLimit, perWindow, window)
	}
	cmd := nodeRegScript.Run(ctx, r.rdb, []string{r.keys.NodeRegistrations(nodeID)}, perWindow, millis(window))
	v, err := ints(cmd, 2)
	if err != nil {
		return false, 0, fmt.Errorf("count registration of %s: %w", nodeID, err)
	}
	if v[0] == 1 {
		return true, 0, nil
	}
	wait := min(max(time.Duration(v[1])*time.Millisecond, time.Millisecond), window)
	return false, wait, nil
}
