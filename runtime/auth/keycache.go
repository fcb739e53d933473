package auth

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
)

const (
	// DefaultKeyCacheTTL is how long a key found in the store is trusted
	// without asking again: the staleness bound when a revocation message
	// is lost.
	DefaultKeyCacheTTL = 30 * time.Second
	// DefaultNegativeTTL is how long an unknown hash is remembered, so a
	// burst of bad keys costs one store lookup per key per 10 s instead of
	// one per request.
	DefaultNegativeTTL = 10 * time.Second
	// DefaultMaxKeys bounds the cached keys (about 200 bytes each): far
	// more keys than a company's teams use within one TTL.
	DefaultMaxKeys = 50_000
	// DefaultMaxNegative bounds the remembered unknown hashes; a flood of
	// random keys evicts the oldest instead of growing memory.
	DefaultMaxNegative = 10_000
	// keyLookupTimeout is the store operation timeout: a stuck database
	// turns into a 503, not a hung request.
	keyLookupTimeout = 2 * time.Second
)

// KeyCacheConfig configures a KeyCache. Zero durations and sizes take the
// defaults above.
type KeyCacheConfig struct {
	// Store is where keys are looked up on a miss. Required.
	Store KeyStore
	// Redis carries revocations between replicas. Nil means a single
	// process: Revoke evicts locally and Run only waits for its context.
	Redis redis.UniversalClient
	// Prefix starts every Redis name this cache uses; the revocation
	// channel is Prefix+"auth:revoked".
	Prefix string
	// Now is the clock that TTLs and key expiry are checked against;
	// nil means time.Now.
	Now func() time.Time
	// TTL is how long a found key is cached (DefaultKeyCacheTTL).
	TTL time.Duration
	// NegativeTTL is how long an unknown hash is cached (DefaultNegativeTTL).
	NegativeTTL time.Duration
	// MaxKeys bounds the found keys cached (DefaultMaxKeys).
	MaxKeys int
	// MaxNegative bounds the unknown hashes cached (DefaultMaxNegative).
	MaxNegative int
	// ResubscribeDelay is the wait before resubscribing after a Redis
	// error (DefaultResubscribeDelay).
	ResubscribeDelay time.Duration
	// PingInterval is how long the subscription may stay silent before it
	// is pinged; a ping unanswered for another interval drops the
	// connection (DefaultPingInterval).
	PingInterval time.Duration
	// Logger receives subscription errors; never a key. Nil discards.
	Logger *slog.Logger
}

// withDefaults validates c and fills its defaults.
func (c KeyCacheConfig) withDefaults() (KeyCacheConfig, error) {
	if c.Store == nil {
		return c, errors.New("key cache: store is required")
	}
	if c.TTL < 0 || c.NegativeTTL < 0 || c.MaxKeys < 0 || c.MaxNegative < 0 ||
		c.ResubscribeDelay < 0 || c.PingInterval < 0 {
		return c, errors.New("key cache: durations and sizes must not be negative")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	setDefault(&c.TTL, DefaultKeyCacheTTL)
	setDefault(&c.NegativeTTL, DefaultNegativeTTL)
	setDefault(&c.MaxKeys, DefaultMaxKeys)
	setDefault(&c.MaxNegative, DefaultMaxNegative)
	setDefault(&c.ResubscribeDelay, DefaultResubscribeDelay)
	setDefault(&c.PingInterval, DefaultPingInterval)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, nil
}

// setDefault sets *v to def when it is zero.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// KeyCache is the gateway's local cache of API keys by hash: the cheapest
// admission step. Found keys are kept for TTL, unknown hashes for
// NegativeTTL; concurrent misses on one hash make one store lookup; expiry
// and revocation are checked on every use. Revocations published by any
// replica evict the key everywhere once Run is running.
type KeyCache struct {
	cfg     KeyCacheConfig
	channel string
	flight  singleflight.Group
	flushes atomic.Int64

	mu      sync.Mutex
	entries map[string]*cacheEntry
	byID    map[int64]*cacheEntry
	found   *list.List // entries with a record, oldest first
	missing *list.List // unknown hashes, oldest first
	// gen counts evictions; a lookup that started before one does not
	// cache its possibly stale answer.
	gen uint64
}

// cacheEntry is one cached answer of the store.
type cacheEntry struct {
	hash     string
	rec      KeyRecord
	found    bool
	storedAt time.Time
	elem     *list.Element
}

// lookupResult is what one store lookup shares with every waiter.
type lookupResult struct {
	rec   KeyRecord
	found bool
}

// NewKeyCache returns an empty cache.
func NewKeyCache(cfg KeyCacheConfig) (*KeyCache, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &KeyCache{
		cfg:     cfg,
		channel: RevocationChannel(cfg.Prefix),
		entries: make(map[string]*cacheEntry),
		byID:    make(map[int64]*cacheEntry),
		found:   list.New(),
		missing: list.New(),
	}, nil
}

// Lookup returns the record of the usable key whose hash is hash. It
// fails with ErrInvalidCredential for an unknown key, ErrExpired,
// ErrRevoked, or ErrUnavailable when the store cannot answer.
func (c *KeyCache) Lookup(ctx context.Context, hash []byte) (KeyRecord, error) {
	k := string(hash)
	now := c.cfg.Now()
	c.mu.Lock()
	if e, ok := c.entries[k]; ok && c.fresh(e, now) {
		res := lookupResult{rec: e.rec, found: e.found}
		c.mu.Unlock()
		return usable(res, now)
	}
	c.mu.Unlock()
	ch := c.flight.DoChan(k, func() (any, error) { return c.fetch(ctx, k) })
	select {
	case r := <-ch:
		if r.Err != nil {
			return KeyRecord{}, r.Err
		}
		return usable(r.Val.(lookupResult), c.cfg.Now())
	case <-ctx.Done():
		return KeyRecord{}, fmt.Errorf("%w: look up api key: %w", ErrUnavailable, ctx.Err())
	}
}

// fresh reports whether e may still be used at now; c.mu is held.
func (c *KeyCache) fresh(e *cacheEntry, now time.Time) bool {
	ttl := c.cfg.NegativeTTL
	if e.found {
		ttl = c.cfg.TTL
	}
	return now.Sub(e.storedAt) < ttl
}

// usable turns a store answer into Lookup's result at now.
func usable(res lookupResult, now time.Time) (KeyRecord, error) {
	switch {
	case !res.found:
		return KeyRecord{}, fmt.Errorf("%w: unknown api key", ErrInvalidCredential)
	case !res.rec.RevokedAt.IsZero():
		return KeyRecord{}, fmt.Errorf("%w: api key revoked", ErrRevoked)
	case !res.rec.ExpiresAt.IsZero() && !now.Before(res.rec.ExpiresAt):
		return KeyRecord{}, fmt.Errorf("%w: api key expired", ErrExpired)
	}
	return res.rec, nil
}

// fetch asks the store about hash k and caches the answer, unless an
// eviction happened meanwhile. It runs once for all concurrent misses of
// k, detached from the first caller's cancellation so that one client
// going away does not fail the others.
func (c *KeyCache) fetch(ctx context.Context, k string) (any, error) {
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyLookupTimeout)
	defer cancel()
	rec, err := c.cfg.Store.LookupKey(lctx, []byte(k))
	res := lookupResult{rec: rec, found: err == nil}
	if err != nil && !errors.Is(err, ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: look up api key: %w", ErrUnavailable, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		c.insert(k, res, c.cfg.Now())
	}
	return res, nil
}

// insert caches res under k, evicting the oldest entry of its kind when
// full; c.mu is held.
func (c *KeyCache) insert(k string, res lookupResult, now time.Time) {
	if old, ok := c.entries[k]; ok {
		c.remove(old)
	}
	l, limit := c.missing, c.cfg.MaxNegative
	if res.found {
		l, limit = c.found, c.cfg.MaxKeys
	}
	for l.Len() >= limit {
		c.remove(l.Front().Value.(*cacheEntry))
	}
	e := &cacheEntry{hash: k, rec: res.rec, found: res.found, storedAt: now}
	e.elem = l.PushBack(e)
	c.entries[k] = e
	if res.found {
		c.byID[res.rec.ID] = e
	}
}

// remove drops e from the cache; c.mu is held.
func (c *KeyCache) remove(e *cacheEntry) {
	delete(c.entries, e.hash)
	if e.found {
		c.found.Remove(e.elem)
		if c.byID[e.rec.ID] == e {
			delete(c.byID, e.rec.ID)
		}
		return
	}
	c.missing.Remove(e.elem)
}

// evictHash drops the entry of hash k, if any.
func (c *KeyCache) evictHash(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if e, ok := c.entries[k]; ok {
		c.remove(e)
	}
}

// evictID drops the entry of the key with id, if any.
func (c *KeyCache) evictID(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if e, ok := c.byID[id]; ok {
		c.remove(e)
	}
}

// Flush empties the cache. Run calls it after every (re)subscription,
// since revocations published while unsubscribed were missed.
func (c *KeyCache) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.entries)
	clear(c.byID)
	c.found.Init()
	c.missing.Init()
	c.flushes.Add(1)
}

// KeyCacheStats is a snapshot of a KeyCache for metrics and tests.
type KeyCacheStats struct {
	// Keys and Negative count the cached found keys and unknown hashes.
	Keys, Negative int
	// Flushes counts whole-cache flushes (one per Redis subscription).
	Flushes int64
}

// Stats returns the cache's current sizes and counters.
func (c *KeyCache) Stats() KeyCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return KeyCacheStats{Keys: c.found.Len(), Negative: c.missing.Len(), Flushes: c.flushes.Load()}
}
