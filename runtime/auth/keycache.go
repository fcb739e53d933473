package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
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
	// Clock is the clock that TTLs and key expiry are checked against and
	// that times Run's resubscriptions; nil means the real clock.
	Clock clock.Clock
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
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
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
// NegativeTTL, each kind in its own least-recently-used bound; concurrent
// misses on one hash make one store lookup; expiry and revocation are
// checked on every use. Revocations published by any replica evict the key
// everywhere once Run is running.
//
// The bounds are golang-lru's simplelru under the cache's own lock. Its
// expirable variant does not fit: it reads the wall clock rather than
// KeyCacheConfig.Clock, has one TTL per cache where found and unknown keys
// need two, and starts a cleanup goroutine per cache that cannot be
// stopped. Freshness is therefore checked here, against the injected clock.
type KeyCache struct {
	cfg     KeyCacheConfig
	channel string
	flight  singleflight.Group
	flushes atomic.Int64

	mu      sync.Mutex
	found   *simplelru.LRU[string, cacheEntry] // keys with a record, by hash
	missing *simplelru.LRU[string, time.Time]  // unknown hashes → when stored
	byID    map[int64]string                   // hash of each found key, by id
	// gen counts evictions; a lookup that started before one does not
	// cache its possibly stale answer.
	gen uint64
}

// cacheEntry is one cached key the store found.
type cacheEntry struct {
	rec      KeyRecord
	storedAt time.Time
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
	c := &KeyCache{cfg: cfg, channel: RevocationChannel(cfg.Prefix), byID: make(map[int64]string)}
	// The sizes are positive after withDefaults, so NewLRU cannot fail.
	if c.found, err = simplelru.NewLRU(cfg.MaxKeys, c.forgetID); err != nil {
		return nil, fmt.Errorf("key cache: %w", err)
	}
	if c.missing, err = simplelru.NewLRU[string, time.Time](cfg.MaxNegative, nil); err != nil {
		return nil, fmt.Errorf("key cache: %w", err)
	}
	return c, nil
}

// forgetID drops the id index of a found key leaving the cache; c.mu is
// held (simplelru calls it from Add, Remove and Purge).
func (c *KeyCache) forgetID(hash string, e cacheEntry) {
	if c.byID[e.rec.ID] == hash {
		delete(c.byID, e.rec.ID)
	}
}

// Lookup returns the record of the usable key whose hash is hash. It
// fails with ErrInvalidCredential for an unknown key, ErrExpired,
// ErrRevoked, or ErrUnavailable when the store cannot answer.
func (c *KeyCache) Lookup(ctx context.Context, hash []byte) (KeyRecord, error) {
	k := string(hash)
	now := c.cfg.Clock.Now()
	if res, ok := c.cached(k, now); ok {
		return usable(res, now)
	}
	ch := c.flight.DoChan(k, func() (any, error) { return c.fetch(ctx, k) })
	select {
	case r := <-ch:
		if r.Err != nil {
			return KeyRecord{}, r.Err
		}
		return usable(r.Val.(lookupResult), c.cfg.Clock.Now())
	case <-ctx.Done():
		return KeyRecord{}, fmt.Errorf("%w: look up api key: %w", ErrUnavailable, ctx.Err())
	}
}

// cached returns the fresh answer cached for hash k at now, if any.
func (c *KeyCache) cached(k string, now time.Time) (lookupResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.found.Get(k); ok && now.Sub(e.storedAt) < c.cfg.TTL {
		return lookupResult{rec: e.rec, found: true}, true
	}
	if storedAt, ok := c.missing.Get(k); ok && now.Sub(storedAt) < c.cfg.NegativeTTL {
		return lookupResult{}, true
	}
	return lookupResult{}, false
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
		c.insert(k, res, c.cfg.Clock.Now())
	}
	return res, nil
}

// insert caches res under k, evicting the least recently used entry of
// its kind when full; c.mu is held.
func (c *KeyCache) insert(k string, res lookupResult, now time.Time) {
	c.remove(k)
	if !res.found {
		c.missing.Add(k, now)
		return
	}
	c.found.Add(k, cacheEntry{rec: res.rec, storedAt: now})
	c.byID[res.rec.ID] = k
}

// remove drops the entry of hash k, of either kind; c.mu is held.
func (c *KeyCache) remove(k string) {
	c.found.Remove(k)
	c.missing.Remove(k)
}

// evictHash drops the entry of hash k, if any.
func (c *KeyCache) evictHash(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.remove(k)
}

// evictID drops the entry of the key with id, if any.
func (c *KeyCache) evictID(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if k, ok := c.byID[id]; ok {
		c.remove(k)
	}
}

// Flush empties the cache. Run calls it after every (re)subscription,
// since revocations published while unsubscribed were missed.
func (c *KeyCache) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.found.Purge()
	c.missing.Purge()
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
