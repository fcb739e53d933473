package quota

import (
	"context"
	"fmt"
	"time"
)

// StreamDecision is the outcome of AcquireStream.
type StreamDecision struct {
	// Allowed reports whether the request holds a slot.
	Allowed bool
	// Active is the number of slots the key holds after the call, this
	// request's included when Allowed.
	Active int
	// RetryAfter, set only when refused, is when the client should try
	// again: at most streamRetryHint, sooner if the oldest slot expires
	// sooner.
	RetryAfter time.Duration
}

// AcquireStream takes one of keyID's maxStreams concurrent stream slots for
// requestID. The slot lives until ReleaseStream, or at most
// Config.MaxStreamDuration (RefreshStream extends it), so a slot whose
// release never ran is free again after that time without waiting for any
// key TTL. Acquiring a slot requestID already holds is allowed again and
// moves its deadline. A refused request takes nothing.
func (l *Limiter) AcquireStream(ctx context.Context, keyID, requestID string, maxStreams int) (StreamDecision, error) {
	if err := checkName("key id", keyID); err != nil {
		return StreamDecision{}, err
	}
	if err := checkName("request id", requestID); err != nil {
		return StreamDecision{}, err
	}
	if err := checkLimit("max streams", int64(maxStreams)); err != nil {
		return StreamDecision{}, err
	}
	cmd := acquireStreamScript.Run(ctx, l.rdb, []string{l.keys.Streams(keyID)},
		requestID, maxStreams, millis(l.cfg.MaxStreamDuration))
	r, err := ints(cmd, 3)
	if err != nil {
		return StreamDecision{}, fmt.Errorf("acquire stream slot: %w", err)
	}
	d := StreamDecision{Allowed: r[0] == 1, Active: int(r[1])}
	if !d.Allowed {
		d.RetryAfter = min(streamRetryHint, max(time.Duration(r[2])*time.Millisecond, time.Millisecond))
	}
	return d, nil
}

// ReleaseStream frees requestID's slot. It is idempotent, so the gateway
// may call it on every path, and the ledger sweeper again for orphans.
// Call it with a context that outlives the client's request
// (context.WithoutCancel plus a short timeout): it must run after the
// client has gone.
func (l *Limiter) ReleaseStream(ctx context.Context, keyID, requestID string) error {
	if err := checkName("key id", keyID); err != nil {
		return err
	}
	if err := l.leases.wait(ctx, requestID); err != nil {
		return fmt.Errorf("release stream slot: %w", err)
	}
	if err := l.rdb.ZRem(ctx, l.keys.Streams(keyID), requestID).Err(); err != nil {
		return fmt.Errorf("release stream slot: %w", err)
	}
	return nil
}

// RefreshStream moves requestID's slot deadline to now plus
// Config.MaxStreamDuration and reports whether the slot was still held. A
// deployment that wants crashed gateways' slots back sooner sets a short
// MaxStreamDuration and refreshes live streams well within it; with the
// default (the maximum request duration) no refresh is needed.
func (l *Limiter) RefreshStream(ctx context.Context, keyID, requestID string) (bool, error) {
	if err := checkName("key id", keyID); err != nil {
		return false, err
	}
	if err := l.leases.wait(ctx, requestID); err != nil {
		return false, fmt.Errorf("refresh stream slot: %w", err)
	}
	n, err := refreshStreamScript.Run(ctx, l.rdb, []string{l.keys.Streams(keyID)},
		requestID, millis(l.cfg.MaxStreamDuration)).Int64()
	if err != nil {
		return false, fmt.Errorf("refresh stream slot: %w", err)
	}
	return n == 1, nil
}
