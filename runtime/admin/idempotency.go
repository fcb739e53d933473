package admin

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/store"
)

// Idempotency scopes: an Idempotency-Key is unique within its scope.
const (
	scopeKeyCreate   = "api_key.create"
	scopeNodeToken   = "node_token.issue"
	scopeTeamCreate  = "team.create_only"
	scopeModelCreate = "model.create_only"
	idempotencyTable = "admin_idempotency" // created by store migration 0003
)

// idempotency records Idempotency-Keys in the database, so a retry reaching
// another replica still finds the first answer.
type idempotency struct {
	db *store.DB
}

func newIdempotency(db *store.DB) *idempotency { return &idempotency{db: db} }

// fingerprint is the hex SHA-256 of v's JSON: a retry sends the same
// request, so a different fingerprint under the same key is a conflict.
func fingerprint(v any) string {
	b, _ := json.Marshal(v) // request structs always marshal
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// lookupIdempotent returns the resource recorded for (scope, key), or 0
// when there is none; ErrIdempotencyConflict, with the resource, when it
// was recorded for another request.
func lookupIdempotent(ctx context.Context, tx *sql.Tx, scope, key, fp string) (int64, error) {
	id, _, err := readIdempotent(ctx, tx, scope, key, fp)
	return id, err
}

// readIdempotent is lookupIdempotent that also reports whether a record
// exists, for scopes whose resources have no numeric id (recorded as 0).
func readIdempotent(ctx context.Context, tx *sql.Tx, scope, key, fp string) (int64, bool, error) {
	var (
		got string
		id  int64
	)
	err := tx.QueryRowContext(ctx, "SELECT fingerprint, resource_id FROM admin_idempotency WHERE scope = $1 AND key = $2",
		scope, key).Scan(&got, &id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("read idempotency key: %w", err)
	case got != fp:
		return id, true, ErrIdempotencyConflict
	}
	return id, true, nil
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
