package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrKeyNotFound is returned by a KeyStore when no key has the hash.
var ErrKeyNotFound = errors.New("auth: api key not found")

// KeyRecord is what the key store holds about one API key: never its
// secret, only what the gateway needs to admit a request.
type KeyRecord struct {
	// ID is api_keys.id.
	ID int64
	// TeamID and TeamName are the key's team.
	TeamID   int64
	TeamName string
	// Prefix is the key's display form ("llp_AbC123xy"), safe to show.
	Prefix string
	// Limits are the key's quotas.
	Limits Limits
	// ExpiresAt is when the key stops working; zero means never.
	ExpiresAt time.Time
	// RevokedAt is when the key was revoked; zero means it was not.
	RevokedAt time.Time
}

// KeyStore finds API keys by the SHA-256 of their secret (credential.HashKey). The SQL
// implementation over runtime/store lives beside the admin API; MemKeyStore
// serves tests and examples.
type KeyStore interface {
	// LookupKey returns the key whose hash is hash, revoked or expired ones
	// included, or an error wrapping ErrKeyNotFound.
	LookupKey(ctx context.Context, hash []byte) (KeyRecord, error)
}

var _ KeyStore = (*MemKeyStore)(nil)

// MemKeyStore is an in-memory KeyStore for tests. It counts lookups and can
// hold them back or fail them, so tests can observe caching and
// coalescing.
type MemKeyStore struct {
	lookups atomic.Int64

	mu   sync.Mutex
	keys map[string]KeyRecord
	gate chan struct{} // while not nil, lookups wait for it to close
	err  error         // when not nil, every lookup fails with it
}

// NewMemKeyStore returns an empty store.
func NewMemKeyStore() *MemKeyStore {
	return &MemKeyStore{keys: make(map[string]KeyRecord)}
}

// Put stores rec under hash, replacing any record there.
func (s *MemKeyStore) Put(hash []byte, rec KeyRecord) {
	rec.Limits.ModelAllowlist = slices.Clone(rec.Limits.ModelAllowlist)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[string(hash)] = rec
}

// Revoke marks the key with id revoked at at, as the admin API does in
// PostgreSQL. It reports whether the key exists.
func (s *MemKeyStore) Revoke(id int64, at time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, rec := range s.keys {
		if rec.ID == id {
			rec.RevokedAt = at
			s.keys[h] = rec
			return true
		}
	}
	return false
}

// Hold makes lookups wait until release is called (or their context
// ends). Releasing twice is harmless.
func (s *MemKeyStore) Hold() (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.gate == gate {
				s.gate = nil
			}
			s.mu.Unlock()
			close(gate)
		})
	}
}

// SetError makes every lookup fail with err, as an unreachable database
// would; nil restores normal service.
func (s *MemKeyStore) SetError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// Lookups returns how many lookups reached the store.
func (s *MemKeyStore) Lookups() int64 { return s.lookups.Load() }

// LookupKey implements KeyStore. The answer is read before waiting on a
// Hold, like a database reply still in flight when a revocation commits.
func (s *MemKeyStore) LookupKey(ctx context.Context, hash []byte) (KeyRecord, error) {
	s.lookups.Add(1)
	s.mu.Lock()
	rec, ok := s.keys[string(hash)]
	gate, err := s.gate, s.err
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return KeyRecord{}, fmt.Errorf("mem key store: %w", ctx.Err())
		}
	}
	switch {
	case err != nil:
		return KeyRecord{}, fmt.Errorf("mem key store: %w", err)
	case !ok:
		return KeyRecord{}, ErrKeyNotFound
	}
	return rec, nil
}
