package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"k8s.io/utils/clock"
)

// ErrTeamNotFound is returned by a TeamStore for a name no team has.
var ErrTeamNotFound = errors.New("auth: team not found")

const (
	// teamCacheTTL is how long a team name → id answer is reused: a JWT
	// request then costs no database query, and a deleted team stops
	// resolving within a minute.
	teamCacheTTL = time.Minute
	// maxTeamCacheEntries bounds the team cache. Only names inside
	// verified tokens reach it; past the bound the least recently used
	// name is dropped.
	maxTeamCacheEntries = 10_000
)

// TeamStore resolves the team named in a verified JWT. The SQL
// implementation lives beside the admin API; MemTeamStore serves tests.
type TeamStore interface {
	// TeamByName returns the id of the team called name, or an error
	// wrapping ErrTeamNotFound.
	TeamByName(ctx context.Context, name string) (id int64, err error)
}

var _ TeamStore = (*MemTeamStore)(nil)

// MemTeamStore is an in-memory TeamStore for tests; it counts lookups.
type MemTeamStore struct {
	lookups atomic.Int64

	mu    sync.Mutex
	teams map[string]int64
}

// NewMemTeamStore returns a store holding the given name → id pairs.
func NewMemTeamStore(teams map[string]int64) *MemTeamStore {
	s := &MemTeamStore{teams: make(map[string]int64, len(teams))}
	for name, id := range teams {
		s.teams[name] = id
	}
	return s
}

// Put adds or replaces a team.
func (s *MemTeamStore) Put(name string, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.teams[name] = id
}

// Lookups returns how many lookups reached the store.
func (s *MemTeamStore) Lookups() int64 { return s.lookups.Load() }

// TeamByName implements TeamStore.
func (s *MemTeamStore) TeamByName(ctx context.Context, name string) (int64, error) {
	s.lookups.Add(1)
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("mem team store: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.teams[name]
	if !ok {
		return 0, ErrTeamNotFound
	}
	return id, nil
}

// teamCache remembers team ids found by name for teamCacheTTL, the
// maxTeamCacheEntries most recently used. The bound is golang-lru's
// simplelru; freshness is checked here against the injected clock, which
// the library's expirable variant cannot take (it reads the wall clock and
// starts a cleanup goroutine that cannot be stopped).
type teamCache struct {
	store TeamStore
	clock clock.PassiveClock

	mu      sync.Mutex
	entries *simplelru.LRU[string, teamEntry]
}

// teamEntry is one cached team id.
type teamEntry struct {
	id       int64
	storedAt time.Time
}

// newTeamCache returns an empty team cache over store.
func newTeamCache(store TeamStore, clk clock.PassiveClock) (*teamCache, error) {
	entries, err := simplelru.NewLRU[string, teamEntry](maxTeamCacheEntries, nil)
	if err != nil {
		return nil, fmt.Errorf("team cache: %w", err)
	}
	return &teamCache{store: store, clock: clk, entries: entries}, nil
}

// id returns the id of the team called name: ErrInvalidCredential when no
// team has it, ErrUnavailable when the store fails.
func (c *teamCache) id(ctx context.Context, name string) (int64, error) {
	now := c.clock.Now()
	c.mu.Lock()
	e, ok := c.entries.Get(name)
	c.mu.Unlock()
	if ok && now.Sub(e.storedAt) < teamCacheTTL {
		return e.id, nil
	}
	lctx, cancel := context.WithTimeout(ctx, keyLookupTimeout)
	defer cancel()
	id, err := c.store.TeamByName(lctx, name)
	switch {
	case errors.Is(err, ErrTeamNotFound):
		return 0, fmt.Errorf("%w: jwt names an unknown team", ErrInvalidCredential)
	case err != nil:
		return 0, fmt.Errorf("%w: look up team: %w", ErrUnavailable, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.Add(name, teamEntry{id: id, storedAt: now})
	return id, nil
}
