package auth

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/credential"
)

// newTestKey stores rec under a new key in store and returns the key.
func newTestKey(t *testing.T, store *MemKeyStore, rec KeyRecord) credential.Key {
	t.Helper()
	k, err := credential.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	rec.Prefix = k.Display
	store.Put(k.Hash, rec)
	return k
}

func newTestCache(t *testing.T, cfg KeyCacheConfig) *KeyCache {
	t.Helper()
	c, err := NewKeyCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestKeyCacheLookup(t *testing.T) {
	clock := newFakeClock()
	now := clock.Now()
	tests := []struct {
		name    string
		rec     *KeyRecord // nil: the key is not in the store
		wantErr error
	}{
		{name: "valid", rec: &KeyRecord{ID: 42, TeamID: 7, TeamName: "ml", Limits: Limits{RPM: 60}}},
		{name: "valid until later", rec: &KeyRecord{ID: 43, TeamID: 7, ExpiresAt: now.Add(time.Hour)}},
		{name: "unknown", wantErr: ErrInvalidCredential},
		{name: "expired in store", rec: &KeyRecord{ID: 44, ExpiresAt: now.Add(-time.Second)}, wantErr: ErrExpired},
		{name: "expires now", rec: &KeyRecord{ID: 45, ExpiresAt: now}, wantErr: ErrExpired},
		{name: "revoked in store", rec: &KeyRecord{ID: 46, RevokedAt: now.Add(-time.Minute)}, wantErr: ErrRevoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewMemKeyStore()
			cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: clock})
			k, err := credential.GenerateKey()
			if err != nil {
				t.Fatal(err)
			}
			if tt.rec != nil {
				store.Put(k.Hash, *tt.rec)
			}
			for range 3 { // the second and third answers come from the cache
				got, err := cache.Lookup(context.Background(), k.Hash)
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
					t.Fatalf("Lookup error = %v, want %v", err, tt.wantErr)
				}
				if tt.wantErr == nil && got.ID != tt.rec.ID {
					t.Fatalf("Lookup ID = %d, want %d", got.ID, tt.rec.ID)
				}
			}
			if got := store.Lookups(); got != 1 {
				t.Errorf("store lookups = %d, want 1", got)
			}
		})
	}
}

func TestKeyCacheExpiryWhileCached(t *testing.T) {
	clock := newFakeClock()
	store := NewMemKeyStore()
	cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: clock})
	k := newTestKey(t, store, KeyRecord{ID: 1, ExpiresAt: clock.Now().Add(10 * time.Second)})
	if _, err := cache.Lookup(context.Background(), k.Hash); err != nil {
		t.Fatalf("Lookup before expiry: %v", err)
	}
	clock.Step(11 * time.Second) // past expires_at, within the cache TTL
	_, err := cache.Lookup(context.Background(), k.Hash)
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("Lookup after expiry error = %v, want ErrExpired", err)
	}
	if got := store.Lookups(); got != 1 {
		t.Errorf("store lookups = %d, want 1 (expiry decided from the cache)", got)
	}
}

func TestKeyCacheTTLBoundsStaleness(t *testing.T) {
	clock := newFakeClock()
	store := NewMemKeyStore()
	cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: clock})
	k := newTestKey(t, store, KeyRecord{ID: 1})
	if _, err := cache.Lookup(context.Background(), k.Hash); err != nil {
		t.Fatal(err)
	}
	store.Revoke(1, clock.Now()) // and the revocation message is lost
	clock.Step(DefaultKeyCacheTTL - time.Millisecond)
	if _, err := cache.Lookup(context.Background(), k.Hash); err != nil {
		t.Fatalf("Lookup within the TTL = %v, want the cached key", err)
	}
	clock.Step(time.Millisecond)
	if _, err := cache.Lookup(context.Background(), k.Hash); !errors.Is(err, ErrRevoked) {
		t.Fatalf("Lookup at the TTL error = %v, want ErrRevoked", err)
	}
	if got := store.Lookups(); got != 2 {
		t.Errorf("store lookups = %d, want 2", got)
	}
}

// lookupConcurrently runs n concurrent Lookups of hash while the store
// holds its answer, and returns their errors.
func lookupConcurrently(t *testing.T, cache *KeyCache, store *MemKeyStore, hash []byte, n int) []error {
	t.Helper()
	release := store.Hold()
	defer release()
	errs := make([]error, n)
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			started.Done()
			_, errs[i] = cache.Lookup(context.Background(), hash)
		}()
	}
	started.Wait()
	for store.Lookups() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let the rest join the flight
	release()
	done.Wait()
	return errs
}

func TestKeyCacheCoalescesMisses(t *testing.T) {
	clock := newFakeClock()
	store := NewMemKeyStore()
	cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: clock})
	k := newTestKey(t, store, KeyRecord{ID: 1})
	for i, err := range lookupConcurrently(t, cache, store, k.Hash, 100) {
		if err != nil {
			t.Fatalf("lookup %d: %v", i, err)
		}
	}
	if got := store.Lookups(); got != 1 {
		t.Errorf("store lookups for 100 concurrent first uses = %d, want 1", got)
	}
}

func TestKeyCacheNegative(t *testing.T) {
	clock := newFakeClock()
	store := NewMemKeyStore()
	cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: clock})
	bad, err := credential.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range lookupConcurrently(t, cache, store, bad.Hash, 100) {
		if !errors.Is(err, ErrInvalidCredential) {
			t.Fatalf("lookup %d error = %v, want ErrInvalidCredential", i, err)
		}
	}
	for range 1000 {
		if _, err := cache.Lookup(context.Background(), bad.Hash); !errors.Is(err, ErrInvalidCredential) {
			t.Fatalf("repeat lookup error = %v, want ErrInvalidCredential", err)
		}
	}
	if got := store.Lookups(); got != 1 {
		t.Fatalf("store lookups for 1,100 uses of a bad key = %d, want 1", got)
	}
	clock.Step(DefaultNegativeTTL)
	if _, err := cache.Lookup(context.Background(), bad.Hash); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("lookup after the negative TTL error = %v", err)
	}
	if got := store.Lookups(); got != 2 {
		t.Errorf("store lookups after the negative TTL = %d, want 2", got)
	}
}

func TestKeyCacheNegativeIsBounded(t *testing.T) {
	const limit = 4
	clock := newFakeClock()
	store := NewMemKeyStore()
	cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: clock, MaxNegative: limit})
	var bad []credential.Key
	for range limit + 1 {
		k, err := credential.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		bad = append(bad, k)
		_, _ = cache.Lookup(context.Background(), k.Hash)
	}
	if got := cache.Stats().Negative; got != limit {
		t.Fatalf("negative entries = %d, want %d", got, limit)
	}
	tests := []struct {
		name        string
		key         credential.Key
		wantLookups int64
	}{
		{name: "newest still cached", key: bad[limit], wantLookups: limit + 1},
		{name: "oldest evicted", key: bad[0], wantLookups: limit + 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _ = cache.Lookup(context.Background(), tt.key.Hash)
			if got := store.Lookups(); got != tt.wantLookups {
				t.Errorf("store lookups = %d, want %d", got, tt.wantLookups)
			}
		})
	}
}

func TestKeyCachePositiveIsBounded(t *testing.T) {
	const limit = 3
	store := NewMemKeyStore()
	cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: newFakeClock(), MaxKeys: limit})
	for i := range 2 * limit {
		k := newTestKey(t, store, KeyRecord{ID: int64(i + 1)})
		if _, err := cache.Lookup(context.Background(), k.Hash); err != nil {
			t.Fatal(err)
		}
	}
	if got := cache.Stats().Keys; got != limit {
		t.Errorf("cached keys = %d, want %d", got, limit)
	}
}

// TestKeyCacheEvictsLeastRecentlyUsed checks that a full cache drops the
// key least recently used, not the oldest stored: a key in constant use
// is not looked up again because newer keys arrived.
func TestKeyCacheEvictsLeastRecentlyUsed(t *testing.T) {
	const limit = 3
	store := NewMemKeyStore()
	cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: newFakeClock(), MaxKeys: limit})
	ctx := context.Background()
	var keys []credential.Key
	for i := range limit + 1 {
		keys = append(keys, newTestKey(t, store, KeyRecord{ID: int64(i + 1)}))
	}
	// keys[0] is stored first but used again before keys[limit] arrives,
	// so keys[1] is the least recently used when the cache overflows.
	for _, k := range append(keys[:limit:limit], keys[0], keys[limit]) {
		if _, err := cache.Lookup(ctx, k.Hash); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name        string
		key         credential.Key
		wantLookups int64
	}{
		{name: "recently used stays cached", key: keys[0], wantLookups: limit + 1},
		{name: "least recently used is evicted", key: keys[1], wantLookups: limit + 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := cache.Lookup(ctx, tt.key.Hash); err != nil {
				t.Fatal(err)
			}
			if got := store.Lookups(); got != tt.wantLookups {
				t.Errorf("store lookups = %d, want %d", got, tt.wantLookups)
			}
		})
	}
}

func TestKeyCacheStoreFailure(t *testing.T) {
	store := NewMemKeyStore()
	cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: newFakeClock()})
	k := newTestKey(t, store, KeyRecord{ID: 1})
	store.SetError(errors.New("connection refused"))
	if _, err := cache.Lookup(context.Background(), k.Hash); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Lookup with the store down error = %v, want ErrUnavailable", err)
	}
	store.SetError(nil)
	if _, err := cache.Lookup(context.Background(), k.Hash); err != nil {
		t.Fatalf("Lookup after the store recovered = %v (a failure must not be cached)", err)
	}
}

func TestKeyCacheWaiterLeavesOnCancel(t *testing.T) {
	store := NewMemKeyStore()
	cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: newFakeClock()})
	k := newTestKey(t, store, KeyRecord{ID: 1})
	release := store.Hold()
	defer release()
	first := make(chan error, 1)
	go func() {
		_, err := cache.Lookup(context.Background(), k.Hash)
		first <- err
	}()
	for store.Lookups() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := cache.Lookup(ctx, k.Hash); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter error = %v, want ErrUnavailable and context.Canceled", err)
	}
	release()
	if err := <-first; err != nil {
		t.Fatalf("the other caller failed with %v", err)
	}
}

func TestKeyCacheLocalRevoke(t *testing.T) {
	tests := []struct {
		name   string
		revoke func(*KeyCache, credential.Key) error
	}{
		{name: "by hash", revoke: func(c *KeyCache, k credential.Key) error { return c.Revoke(context.Background(), k.Hash) }},
		{name: "by key id", revoke: func(c *KeyCache, k credential.Key) error { return c.RevokeKeyID(context.Background(), 1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			store := NewMemKeyStore()
			cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: clock})
			k := newTestKey(t, store, KeyRecord{ID: 1})
			if _, err := cache.Lookup(context.Background(), k.Hash); err != nil {
				t.Fatal(err)
			}
			store.Revoke(1, clock.Now())
			if err := tt.revoke(cache, k); err != nil {
				t.Fatalf("revoke: %v", err)
			}
			if _, err := cache.Lookup(context.Background(), k.Hash); !errors.Is(err, ErrRevoked) {
				t.Errorf("Lookup after revoke error = %v, want ErrRevoked", err)
			}
		})
	}
}

func TestKeyCacheRevokeDuringLookup(t *testing.T) {
	clock := newFakeClock()
	store := NewMemKeyStore()
	cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: clock})
	k := newTestKey(t, store, KeyRecord{ID: 1})
	release := store.Hold()
	defer release()
	done := make(chan error, 1)
	go func() {
		_, err := cache.Lookup(context.Background(), k.Hash)
		done <- err
	}()
	for store.Lookups() == 0 { // the store has read the key, not yet answered
		time.Sleep(time.Millisecond)
	}
	store.Revoke(1, clock.Now())
	if err := cache.RevokeKeyID(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("in-flight lookup = %v, want the answer read before the revocation", err)
	}
	if _, err := cache.Lookup(context.Background(), k.Hash); !errors.Is(err, ErrRevoked) {
		t.Errorf("next Lookup error = %v, want ErrRevoked (the stale answer must not be cached)", err)
	}
}

func TestApplyRevocationMessage(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    bool
	}{
		{name: "id", payload: "id:42", want: true},
		{name: "bare id", payload: "42", want: true},
		{name: "hash", payload: "hash:00ff", want: true},
		{name: "bad hash", payload: "hash:zz", want: false},
		{name: "bad id", payload: "id:x", want: false},
		{name: "garbage", payload: "hello", want: false},
	}
	cache := newTestCache(t, KeyCacheConfig{Store: NewMemKeyStore()})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cache.apply(tt.payload); got != tt.want {
				t.Errorf("apply(%q) = %v, want %v", tt.payload, got, tt.want)
			}
		})
	}
}

func TestKeyCacheConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  KeyCacheConfig
	}{
		{name: "no store", cfg: KeyCacheConfig{}},
		{name: "negative ttl", cfg: KeyCacheConfig{Store: NewMemKeyStore(), TTL: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewKeyCache(tt.cfg); err == nil {
				t.Error("NewKeyCache succeeded, want an error")
			}
		})
	}
}

func TestRunWithoutRedisWaitsForContext(t *testing.T) {
	cache := newTestCache(t, KeyCacheConfig{Store: NewMemKeyStore()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cache.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// BenchmarkKeyCacheHit measures the admission step every API-key request
// takes: a lookup answered from the cache.
func BenchmarkKeyCacheHit(b *testing.B) {
	store := NewMemKeyStore()
	cache, err := NewKeyCache(KeyCacheConfig{Store: store})
	if err != nil {
		b.Fatal(err)
	}
	k, err := credential.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	store.Put(k.Hash, KeyRecord{ID: 1, Prefix: k.Display})
	ctx := context.Background()
	if _, err := cache.Lookup(ctx, k.Hash); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := cache.Lookup(ctx, k.Hash); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
