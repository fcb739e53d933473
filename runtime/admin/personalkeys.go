package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// Errors of personal keys, classified by the console with errors.Is.
var (
	// ErrSelfServiceOff means the team does not let its members make
	// personal keys (teams.self_service_keys is off).
	ErrSelfServiceOff = errors.New("admin: self-service keys are off for the team")
	// ErrKeyManaged means the key was made through the admin API (by
	// Terraform or the platform team): the console does not change it.
	ErrKeyManaged = errors.New("admin: the key is managed through the admin api")
	// ErrExpiryTooLong means a personal key would outlive the team's
	// personal_key_max_days, or has no expiry.
	ErrExpiryTooLong = errors.New("admin: the key's expiry is past the team's personal_key_max_days")
)

// CreatePersonalKey makes a personal key (origin console) for req.TeamID,
// made by by (the member's key prefix or JWT subject), and returns it with
// its secret, which is not stored. The team's switch and its longest key
// life are read in the same transaction as the insert: a platform turning
// self-service off is not raced. The caller has checked that the key's
// models and limits are within its own; this checks the team's rules:
// ErrTeamNotFound, ErrSelfServiceOff, ErrExpiryTooLong.
func (s *SQLStore) CreatePersonalKey(ctx context.Context, req adminwire.CreateKeyRequest, by string, now time.Time) (adminwire.CreatedKey, error) {
	var out adminwire.CreatedKey
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		if err := checkSelfService(ctx, tx, req.TeamID, req.ExpiresAt, now, s.db.Dialect().ForUpdate()); err != nil {
			return err
		}
		secret, err := newSecret(ctx, tx, "")
		if err != nil {
			return err
		}
		var id int64
		err = tx.QueryRowContext(ctx, `INSERT INTO api_keys
			(team_id, name, prefix, hash, model_allowlist, rpm, tokens_per_day, max_streams, max_tokens, expires_at,
			 created_at, origin, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id`,
			req.TeamID, req.Name, secret.Display, secret.Hash, allowlistJSON(req.ModelAllowlist),
			nullIfZero(int64(req.RPM)), nullIfZero(req.TokensPerDay), nullIfZero(int64(req.MaxStreams)),
			nullIfZero(int64(req.MaxTokens)), nullTimeParam(req.ExpiresAt), now, adminwire.KeyOriginConsole, by).Scan(&id)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		k, err := getKey(ctx, tx, id, "")
		out = adminwire.CreatedKey{Key: k, Secret: secret.Secret}
		return err
	})
	if err != nil {
		return adminwire.CreatedKey{}, fmt.Errorf("create personal key: %w", err)
	}
	return out, nil
}

// checkSelfService refuses a personal key the team's rules forbid: the
// switch off, or an expiry absent or past personal_key_max_days from now.
// It locks the team's row (forUpdate) so a concurrent switch-off waits.
func checkSelfService(ctx context.Context, tx *sql.Tx, teamID int64, expires *time.Time, now time.Time, forUpdate string) error {
	var (
		on      bool
		maxDays int64
	)
	err := tx.QueryRowContext(ctx, "SELECT self_service_keys, personal_key_max_days FROM teams WHERE id = $1"+forUpdate,
		teamID).Scan(&on, &maxDays)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("team %d: %w", teamID, ErrTeamNotFound)
	case err != nil:
		return fmt.Errorf("read team: %w", err)
	case !on:
		return fmt.Errorf("team %d: %w", teamID, ErrSelfServiceOff)
	case expires == nil || expires.After(now.Add(time.Duration(maxDays)*24*time.Hour)):
		return fmt.Errorf("team %d allows %d days: %w", teamID, maxDays, ErrExpiryTooLong)
	}
	return nil
}

// RevokePersonalKey revokes the personal key id of team teamID, recording
// by as who did it. A key of another team, or none, is ErrNotFound (the
// caller learns nothing of other teams' keys); a key made through the
// admin API is ErrKeyManaged. Revoking a revoked key changes nothing. It
// works with self-service off: a team may always withdraw its own
// personal keys.
func (s *SQLStore) RevokePersonalKey(ctx context.Context, teamID, id int64, by string, now time.Time) (adminwire.Key, error) {
	var k adminwire.Key
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		k, err = getKey(ctx, tx, id, s.db.Dialect().ForUpdate())
		switch {
		case err != nil:
			return err
		case k.TeamID != teamID:
			return fmt.Errorf("api key %d of team %d: %w", id, teamID, ErrNotFound)
		case k.Managed():
			return fmt.Errorf("api key %d: %w", id, ErrKeyManaged)
		case k.RevokedAt != nil:
			return nil
		}
		if _, err := tx.ExecContext(ctx, "UPDATE api_keys SET revoked_at = $2, revoked_by = $3 WHERE id = $1", id, now, by); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		k, err = getKey(ctx, tx, id, "")
		return err
	})
	if err != nil {
		return adminwire.Key{}, fmt.Errorf("revoke personal key: %w", err)
	}
	return k, nil
}
