package gateway

import (
	"context"
	"k8s.io/utils/clock"
	"sync"
	"time"

	"github.com/llmplat/llmplat/runtime/openai"
)

// DefaultCatalogTTL is how long a loaded model list is trusted: a model
// the platform team adds is served within seconds, and the database is
// asked at most once per TTL, not once per request.
const DefaultCatalogTTL = 5 * time.Second

// catalogLoadTimeout bounds one load of the model list: it runs on a
// request's path, under the catalog's lock, and a frozen database answers
// nothing; the list loads in a millisecond when the database is up.
const catalogLoadTimeout = 2 * time.Second

// CachedCatalog loads the model list through a function and keeps it for a
// TTL. When a reload fails it keeps serving the last good list.
type CachedCatalog struct {
	load  func(context.Context) ([]openai.Model, error)
	ttl   time.Duration
	clock clock.PassiveClock

	mu     sync.Mutex
	models []openai.Model
	loaded time.Time
}

var _ Catalog = (*CachedCatalog)(nil)

// NewCachedCatalog returns a catalog over load; ttl 0 means DefaultCatalogTTL.
func NewCachedCatalog(load func(context.Context) ([]openai.Model, error), ttl time.Duration) *CachedCatalog {
	if ttl == 0 {
		ttl = DefaultCatalogTTL
	}
	return &CachedCatalog{load: load, ttl: ttl, clock: clock.RealClock{}}
}

// Models implements Catalog. A failed reload keeps the last good list for
// another TTL, so that while the database is away one request per TTL,
// not every request, waits for a load (catalogLoadTimeout).
func (c *CachedCatalog) Models(ctx context.Context) ([]openai.Model, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.models != nil && c.clock.Now().Sub(c.loaded) < c.ttl {
		return c.models, nil
	}
	lctx, cancel := context.WithTimeout(ctx, catalogLoadTimeout)
	models, err := c.load(lctx)
	cancel()
	if err != nil {
		if c.models != nil {
			c.loaded = c.clock.Now()
			return c.models, nil
		}
		return nil, err
	}
	if models == nil {
		models = []openai.Model{}
	}
	c.models, c.loaded = models, c.clock.Now()
	return models, nil
}
