package admin

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/store"
)

var (
	_ auth.KeyStore  = (*SQLStore)(nil)
	_ auth.TeamStore = (*SQLStore)(nil)
)

// SQLStore keeps teams, API keys and models in the platform database, on
// PostgreSQL or SQLite. It is the SQL form of auth.KeyStore and
// auth.TeamStore, and the admin API's storage.
type SQLStore struct {
	db  *store.DB
	idm *idempotency
}

// NewSQLStore returns a store over db, which must be migrated.
func NewSQLStore(db *store.DB) *SQLStore {
	return &SQLStore{db: db, idm: newIdempotency(db)}
}

// keyColumns are the api_keys columns scanKey reads, in order.
const keyColumns = `k.id, k.team_id, k.name, k.prefix, k.model_allowlist, k.rpm, k.tokens_per_day,
	k.max_streams, k.max_tokens, k.expires_at, k.revoked_at, k.created_at, k.origin, k.created_by, k.revoked_by`

// rowScanner is *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// scanKey reads one key selected with keyColumns, then extra columns into
// extra. NULL limits read as 0, which auth.Limits and the API both define
// as unlimited.
func scanKey(r rowScanner, extra ...any) (adminwire.Key, error) {
	var (
		k                            adminwire.Key
		allow                        string
		rpm, tpd, streams, maxTokens sql.NullInt64
		expires, revoked             sql.NullTime
	)
	dest := []any{&k.ID, &k.TeamID, &k.Name, &k.Prefix, &allow, &rpm, &tpd, &streams, &maxTokens,
		&expires, &revoked, &k.CreatedAt, &k.Origin, &k.CreatedBy, &k.RevokedBy}
	if err := r.Scan(append(dest, extra...)...); err != nil {
		return adminwire.Key{}, err
	}
	if err := json.Unmarshal([]byte(allow), &k.ModelAllowlist); err != nil {
		return adminwire.Key{}, fmt.Errorf("decode model_allowlist of key %d: %w", k.ID, err)
	}
	if k.ModelAllowlist == nil {
		k.ModelAllowlist = []string{}
	}
	k.RPM, k.TokensPerDay, k.MaxStreams, k.MaxTokens = int(rpm.Int64), tpd.Int64, int(streams.Int64), int(maxTokens.Int64)
	k.ExpiresAt, k.RevokedAt = nullTime(expires), nullTime(revoked)
	k.CreatedAt = k.CreatedAt.UTC()
	return k, nil
}

// nullTime converts a nullable time column, in UTC.
func nullTime(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

// LookupKey implements auth.KeyStore: the key whose SHA-256 is hash, with
// its team's name, revoked and expired keys included.
func (s *SQLStore) LookupKey(ctx context.Context, hash []byte) (auth.KeyRecord, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+keyColumns+`, t.name
		FROM api_keys k JOIN teams t ON t.id = k.team_id WHERE k.hash = $1`, hash)
	var team string
	k, err := scanKey(row, &team)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return auth.KeyRecord{}, auth.ErrKeyNotFound
	case err != nil:
		return auth.KeyRecord{}, fmt.Errorf("look up api key: %w", err)
	}
	rec := auth.KeyRecord{
		ID: k.ID, TeamID: k.TeamID, TeamName: team, Prefix: k.Prefix,
		Limits: auth.Limits{ModelAllowlist: k.ModelAllowlist, RPM: k.RPM, TokensPerDay: k.TokensPerDay,
			MaxStreams: k.MaxStreams, MaxTokens: k.MaxTokens},
	}
	if k.ExpiresAt != nil {
		rec.ExpiresAt = *k.ExpiresAt
	}
	if k.RevokedAt != nil {
		rec.RevokedAt = *k.RevokedAt
	}
	return rec, nil
}

// TeamByName implements auth.TeamStore.
func (s *SQLStore) TeamByName(ctx context.Context, name string) (int64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, "SELECT id FROM teams WHERE name = $1", name).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, auth.ErrTeamNotFound
	case err != nil:
		return 0, fmt.Errorf("look up team: %w", err)
	}
	return id, nil
}

// queryer is *sql.DB, *store.DB or *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// teamExists reports whether the team with id exists.
func teamExists(ctx context.Context, q queryer, id int64) error {
	var one int
	err := q.QueryRowContext(ctx, "SELECT 1 FROM teams WHERE id = $1", id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("team %d: %w", id, ErrTeamNotFound)
	case err != nil:
		return fmt.Errorf("read team: %w", err)
	}
	return nil
}
