package orchestrator

import (
	"sync"
	"time"
)

// Bounds of the bad-registration guard.
const (
	// badTokenMemory is how long a refused token is refused from memory.
	badTokenMemory = 10 * time.Second
	// sourceBadPerWindow bad registrations from one address within
	// sourceWindow get 401 and a log line each; past them the address's
	// bad registrations get retry_after until the window ends, and no
	// log. Only bad tokens count: real nodes behind one NAT share an
	// address, and a token that verifies is never refused for it.
	sourceBadPerWindow = 20
	sourceWindow       = 10 * time.Second
	// nodeRegistrationsPerWindow registrations of one node id within
	// nodeRegistrationWindow are admitted; more get retry_after. An agent
	// on a flapping link, backing off 1 s, 2 s, 4 s… and resetting only
	// after 30 s up, registers a handful of times a minute; a node in a
	// loop gets 10 a minute, not the cluster's 25 a second.
	nodeRegistrationsPerWindow = 10
	nodeRegistrationWindow     = time.Minute
	// guardEntries bounds each map; past it, stale entries are dropped.
	guardEntries = 4096
)

// badRegistrations remembers refused tokens and the addresses sending them.
type badRegistrations struct {
	mu      sync.Mutex
	tokens  map[string]time.Time // token key → when refused
	sources map[string]*window   // address → its bad registrations
}

type window struct {
	start time.Time
	n     int
}

func (b *badRegistrations) refusedLately(key string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.tokens[key]
	return ok && now.Sub(at) < badTokenMemory
}

func (b *badRegistrations) remember(key string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens == nil {
		b.tokens = map[string]time.Time{}
	}
	if len(b.tokens) >= guardEntries {
		for k, at := range b.tokens {
			if now.Sub(at) >= badTokenMemory {
				delete(b.tokens, k)
			}
		}
	}
	if len(b.tokens) < guardEntries {
		b.tokens[key] = now
	}
}

// failed counts a bad registration from the address and returns how many
// it has sent in its current window (the first past guardEntries
// addresses is not counted: 1) and the rest of that window.
func (b *badRegistrations) failed(source string, now time.Time) (int, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sources == nil {
		b.sources = map[string]*window{}
	}
	w := b.sources[source]
	if w == nil || now.Sub(w.start) >= sourceWindow {
		if len(b.sources) >= guardEntries {
			for k, old := range b.sources {
				if now.Sub(old.start) >= sourceWindow {
					delete(b.sources, k)
				}
			}
		}
		if len(b.sources) >= guardEntries {
			return 1, sourceWindow
		}
		w = &window{start: now}
		b.sources[source] = w
	}
	w.n++
	return w.n, sourceWindow - now.Sub(w.start)
}
