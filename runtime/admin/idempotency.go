package admin

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/llmplat/llmplat/runtime/store"
)

// Idempotency scopes: an Idempotency-Key is unique within its scope.
const (
	scopeKeyCreate   = "api_key.create"
	scopeNodeToken   = "node_token.issue"
	idempotencyTable = "admin_idempotency"
)

// idempotencyLockKey is the PostgreSQL advisory lock that serialises
// replicas creating the idempotency table at once ("llmadm" in ASCII);
// store's migration lock is a different number.
const idempotencyLockKey int64 = 0x6c6c6d61646d

// createIdempotencyTable is the DDL of the table that remembers which
// resource an Idempotency-Key created, per dialect.
//
// The table belongs in a store migration (api_keys and node_tokens have no
// column for it in 0001); until one exists, the admin API creates it on
// first use, idempotently and under a lock.
var createIdempotencyTable = map[store.Dialect]string{
	store.Postgres: `CREATE TABLE IF NOT EXISTS admin_idempotency (
		scope       TEXT NOT NULL,
		key         TEXT NOT NULL,
		fingerprint TEXT NOT NULL,
		resource_id BIGINT NOT NULL,
		created_at  TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (scope, key))`,
	store.SQLite: `CREATE TABLE IF NOT EXISTS admin_idempotency (
		scope       TEXT NOT NULL,
		key         TEXT NOT NULL,
		fingerprint TEXT NOT NULL,
		resource_id BIGINT NOT NULL,
		created_at  TIMESTAMP NOT NULL,
		PRIMARY KEY (scope, key))`,
}

// idempotency records Idempotency-Keys in the database, so a retry reaching
// another replica still finds the first answer.
type idempotency struct {
	db *store.DB

	mu    sync.Mutex
	ready bool // the table is known to exist
}

func newIdempotency(db *store.DB) *idempotency { return &idempotency{db: db} }

// ensure creates the table once per process; a failure is retried on the
// next call.
func (m *idempotency) ensure(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready {
		return nil
	}
	err := withTx(ctx, m.db, func(tx *sql.Tx) error {
		if m.db.Dialect() == store.Postgres {
			if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", idempotencyLockKey); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
		}
		_, err := tx.ExecContext(ctx, createIdempotencyTable[m.db.Dialect()])
		return err
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", idempotencyTable, err)
	}
	m.ready = true
	return nil
}

// fingerprint is the hex SHA-256 of v's JSON: a retry sends the same
// request, so a different fingerprint under the same key is a conflict.
func fingerprint(v any) string {
	b, _ := json.Marshal(v) // request structs always marshal
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// lookup returns the resource recorded for (scope, key), or 0 when there is
// none; ErrIdempotencyConflict when it was recorded for another request.
func lookupIdempotent(ctx context.Context, tx *sql.Tx, scope, key, fp string) (int64, error) {
	var (
		got string
		id  int64
	)
	err := tx.QueryRowContext(ctx, "SELECT fingerprint, resource_id FROM admin_idempotency WHERE scope = $1 AND key = $2",
		scope, key).Scan(&got, &id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read idempotency key: %w", err)
	case got != fp:
		return 0, ErrIdempotencyConflict
	}
	return id, nil
}

// recordIdempotent remembers that (scope, key) created resource id. A
// unique violation means a concurrent request with the same key won; the
// caller rolls back and replays.
func recordIdempotent(ctx context.Context, tx *sql.Tx, scope, key, fp string, id int64, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO admin_idempotency (scope, key, fingerprint, resource_id, created_at)
		VALUES ($1, $2, $3, $4, $5)`, scope, key, fp, id, now)
	if err != nil {
		return fmt.Errorf("record idempotency key: %w", err)
	}
	return nil
}

// errRaceLost means a concurrent request recorded the same Idempotency-Key
// first; the caller runs again and replays its answer.
var errRaceLost = errors.New("admin: concurrent request with the same idempotency key")

// idempotentRetries is how often a create reruns after losing a race on its
// Idempotency-Key: one rerun finds the winner's record.
const idempotentRetries = 2

// runIdempotent runs create until it does not lose a race on its key.
func runIdempotent(create func() error) error {
	var err error
	for range idempotentRetries {
		if err = create(); !errors.Is(err, errRaceLost) {
			return err
		}
	}
	return err
}

// isIdempotencyConflict reports whether err is a reused Idempotency-Key.
func isIdempotencyConflict(err error) bool { return errors.Is(err, ErrIdempotencyConflict) }
