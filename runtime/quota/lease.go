package quota

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// A busy key's requests are admitted without a Redis round trip each.
// When a key's requests arrive often at one gateway replica, the Admit that
// goes to Redis also takes tickets for that replica (admit.lua): stream
// slots and places in the minute, taken atomically with the request's own,
// so the limits hold across every replica exactly as before. The next
// requests of the key are admitted on those tickets in memory; each claims
// its ticket's slot under its own request id in the background (claim.lua),
// and every later use of the slot (ReleaseStream, Finish)
// waits for that claim. A ticket nobody used frees its slot at the end of
// its life, and its place in the minute a window later.
//
// What is not taken ahead is the day's tokens: it is read, as Admit always
// reads it, when the tickets are taken, and a ticket admits for at most
// Config.LeaseTTL after that.

const (
	// DefaultLeaseTTL is how long a replica admits on its tickets: long
	// enough that a key at a few dozen requests a second goes to Redis
	// about once a second, short enough that a day's tokens running out is
	// seen within it.
	DefaultLeaseTTL = time.Second
	// claimTimeout bounds a ticket's claim; a ticket lives LeaseTTL plus
	// this, so a claim sent at the end of its lease still finds it.
	claimTimeout = 2 * time.Second
	// leaseMinArrivals is how many requests of a key one replica must have
	// admitted in the previous lease period before it takes tickets: a key
	// used now and then goes to Redis every time, as without leases.
	leaseMinArrivals = 4
	// maxTickets caps the tickets one Admit takes.
	maxTickets = 64
)

// errTicketLost means a ticket's slot had expired before its claim.
var errTicketLost = errors.New("the ticket's slot expired before its claim")

// keyLease is one replica's tickets for one key, and the key's arrivals.
type keyLease struct {
	mu sync.Mutex
	// The current tickets: prefix+1 … prefix+n, the first next handed out;
	// usable until until, under the limits lim.
	prefix  string
	next, n int
	until   time.Time
	lim     KeyLimits
	// snap is the decision the tickets came with, for the counts a local
	// admission reports.
	snap AdmitDecision
	// leasing is set while an Admit is taking tickets: one at a time, or
	// the concurrent ones' tickets would replace each other and their
	// slots sit unused.
	leasing bool
	// Arrivals counted in the period that started at periodStart, and in
	// the one before it.
	periodStart          time.Time
	arrivals, prevPeriod int
}

// leases is a Limiter's tickets, by key id.
type leases struct {
	ttl  time.Duration
	keys sync.Map // key id -> *keyLease
	// claims are the claims under way, by request id.
	claims sync.Map // request id -> *claim
	// used counts the requests admitted on tickets.
	used atomic.Int64
	// swept is when (Unix ns) sweep last ran.
	swept atomic.Int64
}

// idleLeasePeriods is how many lease periods a key's record outlives its
// last arrival before a sweep drops it.
const idleLeasePeriods = 10

// sweep drops the records of keys not seen for idleLeasePeriods periods,
// at most once in that span: a replica keeps records of the keys in use,
// not of every key (or JWT subject) it ever saw. A record dropped while a
// request of its key uses it loses only that arrival's count.
func (l *leases) sweep(now time.Time) {
	span := idleLeasePeriods * l.ttl
	last := l.swept.Load()
	if now.UnixNano()-last < int64(span) || !l.swept.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	l.keys.Range(func(k, v any) bool {
		kl := v.(*keyLease)
		kl.mu.Lock()
		idle := !kl.leasing && now.Sub(kl.periodStart) > span
		kl.mu.Unlock()
		if idle {
			l.keys.CompareAndDelete(k, v)
		}
		return true
	})
}

// claim is a ticket's slot becoming a request's.
type claim struct {
	done chan struct{}
	err  error
}

func (l *leases) lease(keyID string) *keyLease {
	if v, ok := l.keys.Load(keyID); ok {
		return v.(*keyLease)
	}
	v, _ := l.keys.LoadOrStore(keyID, &keyLease{})
	return v.(*keyLease)
}

// take counts an arrival of keyID and hands out a ticket when one is
// usable under lim: its member and the decision to report. Otherwise it
// returns how many tickets the Admit to Redis should ask for.
func (l *leases) take(keyID string, lim KeyLimits, now time.Time) (ticket string, d AdmitDecision, want int) {
	l.sweep(now)
	kl := l.lease(keyID)
	kl.mu.Lock()
	defer kl.mu.Unlock()
	if since := now.Sub(kl.periodStart); since >= l.ttl || since < 0 {
		kl.prevPeriod = 0
		if since < 2*l.ttl && since >= 0 {
			kl.prevPeriod = kl.arrivals
		}
		kl.periodStart, kl.arrivals = now, 0
	}
	kl.arrivals++
	if kl.next < kl.n && now.Before(kl.until) && kl.lim == lim {
		kl.next++
		l.used.Add(1)
		d = kl.snap
		d.OnTicket = true
		if lim.RPM > 0 {
			d.RPMRemaining += kl.n - kl.next // this replica's unused tickets are its to admit
		}
		return kl.prefix + strconv.Itoa(kl.next), d, 0
	}
	if kl.prevPeriod >= leaseMinArrivals && !kl.leasing {
		want = min(kl.prevPeriod, maxTickets)
		kl.leasing = true
	}
	return "", AdmitDecision{}, want
}

// put ends the Admit that asked for tickets: it keeps the n it got (none
// when it failed or was refused), named prefix+1 … prefix+n and taken at
// start under lim, in place of any left.
func (l *leases) put(keyID, prefix string, n int, lim KeyLimits, start time.Time, snap AdmitDecision) {
	kl := l.lease(keyID)
	kl.mu.Lock()
	kl.leasing = false
	if n > 0 {
		kl.prefix, kl.next, kl.n, kl.until, kl.lim, kl.snap = prefix, 0, n, start.Add(l.ttl), lim, snap
	}
	kl.mu.Unlock()
}

// wait waits for requestID's claim, if one is under way, so that what
// follows sees the slot under the request's id.
func (l *leases) wait(ctx context.Context, requestID string) error {
	if l == nil {
		return nil
	}
	v, ok := l.claims.Load(requestID)
	if !ok {
		return nil
	}
	c := v.(*claim)
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// claimTicket makes ticket's slot requestID's, in the background: the
// request goes on meanwhile. It runs on its own timeout, not the caller's
// context, which ends when Admit returns.
func (l *Limiter) claimTicket(ctx context.Context, keyID, requestID, ticket string) {
	c := &claim{done: make(chan struct{})}
	l.leases.claims.Store(requestID, c)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	go func() {
		defer cancel()
		defer func() {
			l.leases.claims.Delete(requestID)
			close(c.done)
		}()
		cmds, err := l.pipe.run(ctx, []scriptCall{{script: claimScript,
			keys: []string{l.keys.Streams(keyID)}, args: []any{ticket, requestID, millis(l.cfg.MaxStreamDuration)}}})
		if cmds != nil {
			var n int64
			if n, err = cmds[0].Int64(); err == nil && n == 0 {
				err = errTicketLost
			}
		}
		if err != nil {
			// The request runs without a slot: the key may have one stream
			// more than its limit until it ends. Only a Redis that fails
			// or stalls for the claim's whole timeout does this.
			c.err = fmt.Errorf("claim stream slot: %w", err)
			l.cfg.Logger.Warn("stream slot of a ticket not claimed", "request_id", requestID, "err", err)
		}
	}()
}
