package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/credential"
	"github.com/llmplat/llmplat/runtime/testenv"
)

const (
	// revocationDeadline is how soon another replica must reject a revoked
	// key ("within seconds"; we ask for one).
	revocationDeadline = time.Second
	// resubscribeDeadline bounds the wait for a cache to notice its
	// connection was killed, and then to resubscribe.
	resubscribeDeadline = 5 * time.Second
	// testResubscribeDelay is the resubscribe timer the reconnect test
	// steps the fake clock past.
	testResubscribeDelay = 50 * time.Millisecond
	// pollEvery is how often the tests re-check a condition.
	pollEvery = 5 * time.Millisecond
)

// replica is one gateway's KeyCache subscribed to Redis.
type replica struct {
	cache *KeyCache
	name  string // the Redis client name of its connections
}

// startReplica builds a KeyCache over its own Redis client named name and
// runs it until the test ends.
func startReplica(t *testing.T, env testenv.RedisEnv, store KeyStore, clock *testingclock.FakeClock, name string) replica {
	t.Helper()
	return startReplicaWith(t, env, KeyCacheConfig{Store: store, Clock: clock}, name)
}

// startReplicaWith is startReplica with more of the cache's config.
func startReplicaWith(t *testing.T, env testenv.RedisEnv, cfg KeyCacheConfig, name string) replica {
	t.Helper()
	opts, err := redis.ParseURL(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	opts.ClientName = name
	rdb := redis.NewClient(opts)
	cfg.Redis, cfg.Prefix, cfg.ResubscribeDelay = rdb, env.Prefix, testResubscribeDelay
	cache := newTestCache(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cache.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		if err := rdb.Close(); err != nil {
			t.Errorf("close redis client: %v", err)
		}
	})
	// Run flushes the cache once its subscription is confirmed; a lookup
	// cached before that flush would be forgotten, so the replica is
	// ready only after it (Redis counting the subscriber is not enough:
	// the client may not have read the confirmation yet).
	testenv.EventuallyWithin(t, resubscribeDeadline, "replica "+name+" to subscribe and flush", func() bool {
		return cache.Stats().Flushes >= 1
	})
	return replica{cache: cache, name: name}
}

// waitSubscribers waits until n clients listen on the revocation channel.
func waitSubscribers(t *testing.T, rdb *redis.Client, prefix string, n int64) {
	t.Helper()
	ch := RevocationChannel(prefix)
	testenv.EventuallyNil(t, resubscribeDeadline, fmt.Sprintf("%d subscribers on %s", n, ch), func() error {
		counts, err := rdb.PubSubNumSub(context.Background(), ch).Result()
		switch {
		case err != nil:
			return fmt.Errorf("pubsub numsub: %w", err)
		case counts[ch] != n:
			return fmt.Errorf("%d subscribers", counts[ch])
		}
		return nil
	})
}

// waitRejected polls cache until hash fails with want, and returns how long
// that took; it fails t after limit.
func waitRejected(t *testing.T, cache *KeyCache, hash []byte, want error, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		_, err := cache.Lookup(context.Background(), hash)
		if errors.Is(err, want) {
			return time.Since(start)
		}
		if err != nil {
			t.Fatalf("Lookup error = %v, want nil or %v", err, want)
		}
		if time.Since(start) > limit {
			t.Fatalf("key still accepted after %v", limit)
		}
		time.Sleep(pollEvery)
	}
}

func TestRevocationAcrossReplicas(t *testing.T) {
	tests := []struct {
		name   string
		revoke func(*KeyCache, credential.Key) error
	}{
		{name: "by hash", revoke: func(c *KeyCache, k credential.Key) error { return c.Revoke(context.Background(), k.Hash) }},
		{name: "by key id", revoke: func(c *KeyCache, k credential.Key) error { return c.RevokeKeyID(context.Background(), 42) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testenv.Redis(t)
			clock := newFakeClock() // frozen: the TTL never ends the cached entries
			store := NewMemKeyStore()
			k := newTestKey(t, store, KeyRecord{ID: 42, TeamID: 7})
			a := startReplica(t, env, store, clock, "auth-a")
			b := startReplica(t, env, store, clock, "auth-b")
			waitSubscribers(t, env.Client(), env.Prefix, 2)
			for _, r := range []replica{a, b} {
				if _, err := r.cache.Lookup(context.Background(), k.Hash); err != nil {
					t.Fatalf("%s: first use: %v", r.name, err)
				}
			}
			store.Revoke(42, clock.Now())
			if _, err := a.cache.Lookup(context.Background(), k.Hash); err != nil {
				t.Fatalf("replica a before the message = %v, want the cached key", err)
			}
			if err := tt.revoke(b.cache, k); err != nil {
				t.Fatalf("revoke on b: %v", err)
			}
			if _, err := b.cache.Lookup(context.Background(), k.Hash); !errors.Is(err, ErrRevoked) {
				t.Errorf("replica b after its own revoke error = %v, want ErrRevoked", err)
			}
			took := waitRejected(t, a.cache, k.Hash, ErrRevoked, revocationDeadline)
			t.Logf("replica a rejected the key %v after the revocation", took)
		})
	}
}

// killClients closes every connection of the Redis clients called name.
func killClients(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	list, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatalf("client list: %v", err)
	}
	killed := 0
	for line := range strings.SplitSeq(strings.TrimSpace(list), "\n") {
		var id string
		named := false
		for field := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(field, "=")
			switch {
			case k == "id":
				id = v
			case k == "name" && v == name:
				named = true
			}
		}
		if named {
			if err := rdb.Do(context.Background(), "CLIENT", "KILL", "ID", id).Err(); err != nil {
				t.Fatalf("client kill: %v", err)
			}
			killed++
		}
	}
	if killed == 0 {
		t.Fatalf("no connection named %s", name)
	}
}

func TestResubscribeFlushesCache(t *testing.T) {
	env := testenv.Redis(t)
	admin := env.Client()
	clock := newFakeClock()
	store := NewMemKeyStore()
	k := newTestKey(t, store, KeyRecord{ID: 42, TeamID: 7})
	name := "auth-" + strings.TrimSuffix(env.Prefix, ":")
	a := startReplica(t, env, store, clock, name)
	waitSubscribers(t, admin, env.Prefix, 1)
	if _, err := a.cache.Lookup(context.Background(), k.Hash); err != nil {
		t.Fatal(err)
	}
	// The key is revoked while the replica is cut off: it never hears of it.
	store.Revoke(42, clock.Now())
	if _, err := a.cache.Lookup(context.Background(), k.Hash); err != nil {
		t.Fatalf("before the reconnect = %v, want the cached key", err)
	}
	flushes := a.cache.Stats().Flushes
	killClients(t, admin, name)
	// The lost subscription sets the resubscribe timer on the cache's
	// clock; the test moves the clock past it.
	testenv.EventuallyWithin(t, resubscribeDeadline, "replica "+name+" to wait to resubscribe", clock.HasWaiters)
	clock.Step(testResubscribeDelay)
	took := waitRejected(t, a.cache, k.Hash, ErrRevoked, resubscribeDeadline)
	t.Logf("rejected %v after the connection was cut", took)
	if got := a.cache.Stats().Flushes; got <= flushes {
		t.Errorf("flushes = %d, want more than %d", got, flushes)
	}
	waitSubscribers(t, admin, env.Prefix, 1)
}

func TestPublishWithoutSubscribers(t *testing.T) {
	env := testenv.Redis(t)
	err := PublishRevokedKeyID(context.Background(), env.Client(), env.Prefix, 1)
	if err != nil {
		t.Errorf("PublishRevokedKeyID = %v, want nil", err)
	}
}

func TestIdleSubscriptionSurvivesPings(t *testing.T) {
	const pingInterval = 20 * time.Millisecond
	env := testenv.Redis(t)
	clock := newFakeClock()
	store := NewMemKeyStore()
	k := newTestKey(t, store, KeyRecord{ID: 42})
	a := startReplicaWith(t, env, KeyCacheConfig{Store: store, Clock: clock, PingInterval: pingInterval}, "auth-idle")
	waitSubscribers(t, env.Client(), env.Prefix, 1)
	time.Sleep(15 * pingInterval) // silent: several pings go out and come back
	if got := a.cache.Stats().Flushes; got != 1 {
		t.Fatalf("flushes = %d, want 1 (pings must not drop a healthy subscription)", got)
	}
	if _, err := a.cache.Lookup(context.Background(), k.Hash); err != nil {
		t.Fatal(err)
	}
	store.Revoke(42, clock.Now())
	if err := PublishRevokedKeyID(context.Background(), env.Client(), env.Prefix, 42); err != nil {
		t.Fatal(err)
	}
	waitRejected(t, a.cache, k.Hash, ErrRevoked, revocationDeadline)
}
