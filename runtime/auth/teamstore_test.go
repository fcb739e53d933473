package auth

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// newTestTeamCache returns a team cache over teams named t0…t(n-1), with
// ids 1…n, and the store it asks.
func newTestTeamCache(t *testing.T, n int, clk clock.PassiveClock) (*teamCache, *MemTeamStore) {
	t.Helper()
	teams := make(map[string]int64, n)
	for i := range n {
		teams["t"+strconv.Itoa(i)] = int64(i + 1)
	}
	store := NewMemTeamStore(teams)
	cache, err := newTeamCache(store, clk)
	if err != nil {
		t.Fatal(err)
	}
	return cache, store
}

func TestTeamCacheTTL(t *testing.T) {
	clock := newFakeClock()
	cache, store := newTestTeamCache(t, 1, clock)
	steps := []struct {
		name        string
		advance     time.Duration
		wantLookups int64
	}{
		{name: "first use asks the store", wantLookups: 1},
		{name: "within the ttl is cached", advance: teamCacheTTL - time.Second, wantLookups: 1},
		{name: "after the ttl asks again", advance: time.Second, wantLookups: 2},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			clock.Step(st.advance)
			id, err := cache.id(context.Background(), "t0")
			if err != nil {
				t.Fatal(err)
			}
			if id != 1 {
				t.Errorf("id = %d, want 1", id)
			}
			if got := store.Lookups(); got != st.wantLookups {
				t.Errorf("store lookups = %d, want %d", got, st.wantLookups)
			}
		})
	}
}

func TestTeamCacheUnknownTeamIsInvalid(t *testing.T) {
	cache, _ := newTestTeamCache(t, 1, newFakeClock())
	_, err := cache.id(context.Background(), "nobody")
	if !errors.Is(err, ErrInvalidCredential) {
		t.Errorf("err = %v, want ErrInvalidCredential", err)
	}
}

// TestTeamCacheEvictsLeastRecentlyUsed checks that a full cache drops one
// entry, the least recently used, rather than every team at once: a busy
// team keeps costing no query when a new one arrives.
func TestTeamCacheEvictsLeastRecentlyUsed(t *testing.T) {
	const n = maxTeamCacheEntries
	cache, store := newTestTeamCache(t, n+1, newFakeClock())
	ctx := context.Background()
	for i := range n {
		if _, err := cache.id(ctx, "t"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	// t0 is used again, so t1 is now the least recently used; tn fills the
	// cache past its bound.
	for _, name := range []string{"t0", "t" + strconv.Itoa(n)} {
		if _, err := cache.id(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name        string
		team        string
		wantLookups int64
	}{
		{name: "recently used stays cached", team: "t0", wantLookups: n + 1},
		{name: "newest stays cached", team: "t" + strconv.Itoa(n), wantLookups: n + 1},
		{name: "least recently used is evicted", team: "t1", wantLookups: n + 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := cache.id(ctx, tt.team); err != nil {
				t.Fatal(err)
			}
			if got := store.Lookups(); got != tt.wantLookups {
				t.Errorf("store lookups = %d, want %d", got, tt.wantLookups)
			}
		})
	}
}
