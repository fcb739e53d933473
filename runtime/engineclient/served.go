package engineclient

import (
	"context"
	"k8s.io/utils/clock"
	"sync"
	"time"
)

// servedNamesTTL is how long a loaded table of served names is used before
// it is loaded again: a model declared or renamed through the admin API
// reaches direct engines within 5 s, and a request costs no query.
const servedNamesTTL = 5 * time.Second

// servedNamesLoadTimeout bounds one load of the table: it runs on a
// request's path, under the cache's lock, and a frozen database answers
// nothing; the table loads in a millisecond when the database is up.
const servedNamesLoadTimeout = 2 * time.Second

// ServedNames maps platform model names to the names engines answer to,
// from a loader (the admin store's model rows), cached for servedNamesTTL.
// A failed reload keeps the last good table, for another TTL: while the
// database is away one request per TTL, not every request, waits for a
// load.
type ServedNames struct {
	load  func(context.Context) (map[string]string, error)
	clock clock.PassiveClock

	mu     sync.Mutex
	names  map[string]string
	loaded time.Time
}

// NewServedNames returns a cache over load.
func NewServedNames(load func(context.Context) (map[string]string, error)) *ServedNames {
	return &ServedNames{load: load, clock: clock.RealClock{}}
}

// Lookup returns the served name of model; ok is false when no table could
// be loaded or it does not name the model.
func (s *ServedNames) Lookup(ctx context.Context, model string) (name string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil || s.clock.Now().Sub(s.loaded) >= servedNamesTTL {
		lctx, cancel := context.WithTimeout(ctx, servedNamesLoadTimeout)
		names, err := s.load(lctx)
		cancel()
		switch {
		case err == nil:
			s.names, s.loaded = names, s.clock.Now()
		case s.names != nil:
			s.loaded = s.clock.Now()
		}
	}
	name, ok = s.names[model]
	return name, ok && name != ""
}
