package quota

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestMain stops the test servers, then fails the run if any goroutine
// (a queue waiter's listener, a handoff) outlived its call.
func TestMain(m *testing.M) { testenv.MainWithLeakCheck(m) }

// newLimiter returns a Limiter on rdb under prefix.
func newLimiter(t testing.TB, rdb redis.UniversalClient, cfg Config) *Limiter {
	t.Helper()
	l, err := New(rdb, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// newQueue returns a Queue on rdb.
func newQueue(t testing.TB, rdb redis.UniversalClient, cfg Config) *Queue {
	t.Helper()
	q, err := NewQueue(rdb, cfg)
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	return q
}
