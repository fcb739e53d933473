package quota

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limit names one of an API key's limits.
type Limit string

// The limits Admit checks, in its order.
const (
	LimitStreams      Limit = "streams"
	LimitTokensPerDay Limit = "tokens_per_day"
	LimitRPM          Limit = "rpm"
)

// KeyLimits are an API key's limits; a zero limit is no limit.
type KeyLimits struct {
	MaxStreams   int
	TokensPerDay int64
	RPM          int
}

// AdmitDecision is the outcome of Admit.
type AdmitDecision struct {
	// Allowed reports whether the request passed every limit. It then
	// holds a stream slot when the key has MaxStreams, and was counted in
	// the key's minute when it has an RPM.
	Allowed bool
	// Refused names the limit that refused it, when not Allowed.
	Refused Limit
	// ActiveStreams is the key's slots after the call (MaxStreams only).
	ActiveStreams int
	// TokensRemaining is the day's tokens left (TokensPerDay only).
	TokensRemaining int64
	// RPMRemaining is what the minute admits now (RPM only, 0 when refused).
	RPMRemaining int
	// RetryAfter, set only when refused, is when the limit that refused
	// may admit again: for streams at most streamRetryHint, sooner when the
	// key's soonest slot deadline comes first; for the day's tokens the next
	// UTC midnight; for rpm exactly when the oldest counted request leaves
	// the window. Never zero on a refusal.
	RetryAfter time.Duration
	// OnTicket reports an admission on a ticket this replica held
	// (lease.go), without a round trip; the counts are then the ticket's.
	OnTicket bool
}

// Admit checks all of keyID's limits for requestID in one round trip, in
// this order and atomically: a stream slot (taking one requestID already
// holds is allowed again and moves its deadline), the day's tokens (read
// only; CountTokens and Finish count them at settle time), then the
// minute's sliding log (exact across replicas; a refused request is not
// recorded). A refusal gives back the slot this call took, and only a
// request that passed the slot and the day's tokens is counted against the
// minute. Give the slot back with Finish, or ReleaseStream.
func (l *Limiter) Admit(ctx context.Context, keyID, requestID string, lim KeyLimits) (AdmitDecision, error) {
	if err := checkName("key id", keyID); err != nil {
		return AdmitDecision{}, err
	}
	if err := checkName("request id", requestID); err != nil {
		return AdmitDecision{}, err
	}
	for _, c := range []struct {
		what string
		v    int64
	}{{"max streams", int64(lim.MaxStreams)}, {"tokens per day", lim.TokensPerDay}, {"rpm", int64(lim.RPM)}} {
		if c.v != 0 {
			if err := checkLimit(c.what, c.v); err != nil {
				return AdmitDecision{}, err
			}
		}
	}
	if lim == (KeyLimits{}) {
		return AdmitDecision{Allowed: true}, nil
	}
	now := l.cfg.Clock.Now().UTC()
	var want int
	var prefix string
	if l.leases != nil {
		ticket, d, n := l.leases.take(keyID, lim, now)
		if ticket != "" {
			if lim.MaxStreams > 0 {
				l.claimTicket(ctx, keyID, requestID, ticket)
			}
			return d, nil
		}
		if want = n; want > 0 {
			prefix = "t:" + l.member() + ":"
		}
	}
	var life time.Duration
	if l.leases != nil {
		life = l.leases.ttl + claimTimeout
	}
	cmds, err := l.pipe.run(ctx, []scriptCall{{script: admitScript,
		keys: []string{l.keys.Streams(keyID), l.keys.RPM(keyID), l.keys.TokensPerDay(keyID, now)},
		args: []any{requestID, lim.MaxStreams, millis(l.cfg.MaxStreamDuration), lim.TokensPerDay,
			lim.RPM, millis(l.window), l.member(), want, prefix, millis(life)}}})
	r, err := ints1(cmds, err, 5)
	if want > 0 {
		var n int
		if err == nil && len(r) > 5 { // tickets, only ever with an admission
			n = int(r[5])
		}
		l.leases.put(keyID, prefix, n, lim, now, admitDecision(r, lim))
	}
	if err != nil {
		return AdmitDecision{}, fmt.Errorf("admit: %w", err)
	}
	d := admitDecision(r, lim)
	switch r[0] {
	case 1:
		d.Refused = LimitStreams
		d.RetryAfter = min(streamRetryHint, max(time.Duration(r[4])*time.Millisecond, time.Millisecond))
	case 2:
		d.Refused = LimitTokensPerDay
		d.RetryAfter = dayStart(now).Add(24 * time.Hour).Sub(now)
	case 3:
		d.Refused = LimitRPM
		d.RetryAfter = max(time.Duration(r[4])*time.Millisecond, time.Millisecond)
	}
	return d, nil
}

// admitDecision reads admit.lua's reply but for the Retry-After; nil reads
// as nothing.
func admitDecision(r []int64, lim KeyLimits) AdmitDecision {
	if len(r) < 5 {
		return AdmitDecision{}
	}
	d := AdmitDecision{Allowed: r[0] == 0, ActiveStreams: int(r[1]), RPMRemaining: int(r[3])}
	if lim.TokensPerDay > 0 {
		d.TokensRemaining = max(lim.TokensPerDay-r[2], 0)
	}
	return d
}

// ints1 is ints for the first reply of a pipeline that may have failed
// whole.
func ints1(cmds []*redis.Cmd, err error, want int) ([]int64, error) {
	if cmds == nil {
		return nil, err
	}
	return ints(cmds[0], want)
}
