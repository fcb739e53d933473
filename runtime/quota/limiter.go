package quota

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limiter checks an API key's stream, rate and daily token limits in Redis.
// It is safe for concurrent use, and any number of gateway replicas may
// share one Redis: every decision is made inside the server.
type Limiter struct {
	rdb    redis.UniversalClient
	cfg    Config
	keys   Keys
	window time.Duration // rateWindow; tests shorten it
	nonce  string        // tells this Limiter's rate-log members from other replicas'
	seq    atomic.Uint64
	// pipe sends Admit's and Finish's scripts, several requests' at once
	// under load (pipeline.go).
	pipe *pipeliner
	// leases are this replica's tickets (lease.go); nil with NoLeases.
	leases *leases
}

// New returns a Limiter on rdb (a client, a cluster client or a client of
// the local mode's embedded server).
func New(rdb redis.UniversalClient, cfg Config) (*Limiter, error) {
	if rdb == nil {
		return nil, errors.New("quota: a redis client is required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("quota: limiter nonce: %w", err)
	}
	l := &Limiter{
		rdb:    rdb,
		cfg:    cfg,
		keys:   NewKeys(cfg.Prefix),
		window: rateWindow,
		nonce:  hex.EncodeToString(b[:]),
		pipe:   &pipeliner{rdb: rdb},
	}
	// A ticket lives its lease plus the claim's timeout, and must not
	// outlive the slot it stands for.
	if ttl := min(cfg.LeaseTTL, cfg.MaxStreamDuration-claimTimeout); !cfg.NoLeases && ttl > 0 {
		l.leases = &leases{ttl: ttl}
	}
	return l, nil
}

// Keys returns the key builder the Limiter uses.
func (l *Limiter) Keys() Keys { return l.keys }

// member returns a rate-log member no other request of any replica has.
func (l *Limiter) member() string {
	return l.nonce + ":" + strconv.FormatUint(l.seq.Add(1), 36)
}

// millis converts d to whole milliseconds for a script argument.
func millis(d time.Duration) int64 {
	return d.Milliseconds()
}

// errShortReply reports a script reply with fewer fields than expected.
func errShortReply(got, want int) error {
	return fmt.Errorf("script reply has %d fields, want %d", got, want)
}
