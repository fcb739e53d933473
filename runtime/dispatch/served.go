package dispatch

import (
	"context"
	"sync"
	"time"
)

// servedNamesTTL is how long a loaded table of served names is used before
// it is loaded again: a model declared or renamed through the admin API
// reaches direct engines within 5 s, and a request costs no query.
const servedNamesTTL = 5 * time.Second

// ServedNames maps platform model names to the names engines answer to,
// from a loader (the admin store's model rows), cached for servedNamesTTL.
// A failed reload keeps the last good table.
type ServedNames struct {
	load func(context.Context) (map[string]string, error)
	now  func() time.Time

	mu     sync.Mutex
	names  map[string]string
	loaded time.Time
}

// NewServedNames returns a cache over load.
func NewServedNames(load func(context.Context) (map[string]string, error)) *ServedNames {
	return &ServedNames{load: load, now: time.Now}
}

// Lookup returns the served name of model; ok is false when no table could
// be loaded or it does not name the model.
func (s *ServedNames) Lookup(ctx context.Context, model string) (name string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil || s.now().Sub(s.loaded) >= servedNamesTTL {
		if names, err := s.load(ctx); err == nil {
			s.names, s.loaded = names, s.now()
		}
	}
	name, ok = s.names[model]
	return name, ok && name != ""
}
