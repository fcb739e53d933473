package registry

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestMain stops the test servers, then fails the run if any goroutine
// (a Watch loop) outlived its test.
func TestMain(m *testing.M) { testenv.MainWithLeakCheck(m) }

// Short times for tests against a real server: records expire in 300 ms and
// Watch polls every 50 ms.
const (
	testTTL      = 300 * time.Millisecond
	testInterval = 50 * time.Millisecond
	// testSlack absorbs scheduling delays of a loaded 2-core machine under
	// the race detector.
	testSlack = 150 * time.Millisecond
)

// newRegistry returns a Registry on rdb with the short test times and the
// given prefix.
func newRegistry(t testing.TB, rdb redis.UniversalClient, prefix string) *Registry {
	t.Helper()
	r, err := New(rdb, Config{Prefix: prefix, TTL: testTTL, WatchInterval: testInterval})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// onPrem returns the record of an on-prem node serving models, owned by
// owner.
func onPrem(id, owner string, models ...string) NodeRecord {
	rec := NodeRecord{
		ID: id, Owner: owner, Location: LocationOnPrem, Version: "0.1.0",
		GPUs: []GPU{{Index: 0, Name: "NVIDIA L40S", MemoryBytes: 48318382080}},
	}
	for _, m := range models {
		rec.Models = append(rec.Models, ModelSlot{Name: m, ServedName: "served/" + m, MaxNumSeqs: 64, MaxModelLen: 8192, KVCapacityTokens: 185000})
	}
	return rec
}

// mustRegister registers rec and returns its epoch.
func mustRegister(t testing.TB, r *Registry, rec NodeRecord) int64 {
	t.Helper()
	epoch, err := r.Register(context.Background(), rec)
	if err != nil {
		t.Fatalf("Register(%s): %v", rec.ID, err)
	}
	return epoch
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
