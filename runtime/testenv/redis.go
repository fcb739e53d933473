package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// redisCleanupTimeout bounds deleting one test's keys.
	redisCleanupTimeout = 30 * time.Second
	// redisScanBatch is the SCAN count hint when deleting a test's keys.
	redisScanBatch = 1000
)

// redisServer is the Redis server this process uses.
type redisServer struct {
	addr  string
	url   string
	where string  // how the server came to be, for the log
	srv   *server // nil for a server named by envRedisURL
}

// redisState holds the outcome of the process's one attempt to get a server.
var redisState struct {
	once   sync.Once
	srv    *redisServer
	err    error
	took   time.Duration
	logged atomic.Bool
}

// RedisEnv is one test's view of the Redis server: where it is and the key
// prefix the test must put its keys under.
type RedisEnv struct {
	// Addr is the server's host:port.
	Addr string
	// URL is the server's redis:// URL.
	URL string
	// Prefix starts every key of this test ("t<random>:"); the keys under
	// it are deleted when the test ends.
	Prefix string

	tb testing.TB
}

// Client returns a new client of the server, closed when the test ends.
func (e RedisEnv) Client() *redis.Client {
	e.tb.Helper()
	opts, err := redis.ParseURL(e.URL)
	if err != nil {
		e.tb.Fatalf("testenv: parse redis URL: %v", err)
	}
	opts.ContextTimeoutEnabled = true // as the platform's clients: deadlines reach the socket
	c := redis.NewClient(opts)
	e.tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			e.tb.Errorf("testenv: close redis client: %v", err)
		}
	})
	return c
}

// Key returns name under the test's prefix.
func (e RedisEnv) Key(name string) string {
	return e.Prefix + name
}

// Redis returns this test's Redis environment: the server (started by the
// first call in a process, or named by LLMPLAT_TEST_REDIS_URL) and a key
// prefix private to tb, whose keys are deleted when tb ends.
func Redis(tb testing.TB) RedisEnv {
	tb.Helper()
	requireMain(tb)
	redisState.once.Do(func() {
		start := time.Now()
		if raw := os.Getenv(envRedisURL); raw != "" {
			redisState.srv, redisState.err = externalRedis(raw)
		} else {
			redisState.srv, redisState.err = startRedis()
		}
		redisState.took = time.Since(start)
	})
	srv, err := redisState.srv, redisState.err
	var missing *missingError
	if errors.As(err, &missing) {
		reportMissing(tb, missing)
		return RedisEnv{}
	}
	if err != nil {
		tb.Fatalf("testenv: Redis: %v", err)
	}
	if redisState.logged.CompareAndSwap(false, true) {
		tb.Logf("testenv: Redis (%s) ready in %v", srv.where, redisState.took.Round(time.Millisecond))
	}
	env := RedisEnv{Addr: srv.addr, URL: srv.url, Prefix: "t" + randomHex(8) + ":", tb: tb}
	tb.Cleanup(func() {
		if err := deletePrefix(env.URL, env.Prefix); err != nil {
			tb.Errorf("testenv: %v", err)
		}
	})
	return env
}

// deletePrefix deletes every key that starts with prefix. The prefix is
// made of hex digits and a colon, so it needs no glob escaping.
func deletePrefix(rawURL, prefix string) error {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return fmt.Errorf("parse redis URL: %w", err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), redisCleanupTimeout)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", redisScanBatch).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan keys of %s: %w", prefix, err)
	}
	if len(keys) == 0 {
		return nil
	}
	if err := c.Unlink(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("delete keys of %s: %w", prefix, err)
	}
	return nil
}
