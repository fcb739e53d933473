package admin

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/credential"
	"github.com/llmplat/llmplat/runtime/store"
)

// nullIfZero stores a limit of 0 (unlimited) as NULL, which the schema
// defines as "no limit" and its CHECK (> 0) requires.
func nullIfZero(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// nullTimeParam is a nullable time parameter in UTC.
func nullTimeParam(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC()
}

// allowlistJSON is the stored form of an allowlist: a JSON array, "[]" for
// none (every model allowed).
func allowlistJSON(list []string) string {
	if list == nil {
		list = []string{}
	}
	b, _ := json.Marshal(list) // a []string always marshals
	return string(b)
}

// getKey reads the key with id through q (the pool or a transaction).
func getKey(ctx context.Context, q queryer, id int64, forUpdate string) (adminwire.Key, error) {
	k, err := scanKey(q.QueryRowContext(ctx, "SELECT "+keyColumns+" FROM api_keys k WHERE k.id = $1"+forUpdate, id))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return adminwire.Key{}, fmt.Errorf("api key %d: %w", id, ErrNotFound)
	case err != nil:
		return adminwire.Key{}, fmt.Errorf("read api key: %w", err)
	}
	return k, nil
}

// CreateKey creates an API key for req.TeamID and returns it with its
// secret, which is not stored. With a non-empty idemKey, a repeat of the
// same request returns the key created first, without its secret
// (Replayed). A repeat that supplies another secret than the key has is a
// new attempt by a client that lost the first secret (a process killed
// before it kept it): it takes the key over, rotated to the repeat's secret
// (Rotated), or makes a new key when that one was revoked since. A request
// that differs in more than its secret under the same idemKey fails with
// ErrIdempotencyConflict, unless the key it made was revoked since: then it
// makes a new key, which idemKey names from then on. A missing team is ErrTeamNotFound.
func (s *SQLStore) CreateKey(ctx context.Context, req adminwire.CreateKeyRequest, idemKey string, now time.Time) (adminwire.CreatedKey, error) {
	return s.CreateKeyBy(ctx, req, idemKey, "", now)
}

// CreateKeyBy is CreateKey recording who made the key (by: the admin
// credential's subject) for the team's audit list.
func (s *SQLStore) CreateKeyBy(ctx context.Context, req adminwire.CreateKeyRequest, idemKey, by string, now time.Time) (adminwire.CreatedKey, error) {
	if req.ExpiresAt != nil {
		t := req.ExpiresAt.UTC()
		req.ExpiresAt = &t
	}
	// The secret is not in the fingerprint: a repeat with another secret
	// is the same create, tried again (see repeatKeyCreate).
	fpReq := req
	fpReq.Key = ""
	fp := fingerprint(fpReq)
	var out adminwire.CreatedKey
	err := runIdempotent(func() error {
		return s.db.InTx(ctx, func(tx *sql.Tx) error {
			var err error
			out, err = s.createKeyTx(ctx, tx, req, idemKey, fp, by, now)
			return err
		})
	})
	if err != nil {
		return adminwire.CreatedKey{}, fmt.Errorf("create api key: %w", err)
	}
	return out, nil
}

// createKeyTx is CreateKey's transaction.
func (s *SQLStore) createKeyTx(ctx context.Context, tx *sql.Tx, req adminwire.CreateKeyRequest, idemKey, fp, by string, now time.Time) (adminwire.CreatedKey, error) {
	retake := false
	if idemKey != "" {
		out, answered, again, err := s.repeatKeyCreate(ctx, tx, idemKey, fp, req.Key)
		if answered || err != nil {
			return out, err
		}
		retake = again
	}
	if err := teamExists(ctx, tx, req.TeamID); err != nil {
		return adminwire.CreatedKey{}, err
	}
	secret, err := newSecret(ctx, tx, req.Key)
	if err != nil {
		return adminwire.CreatedKey{}, err
	}
	var id int64
	err = tx.QueryRowContext(ctx, `INSERT INTO api_keys
		(team_id, name, prefix, hash, model_allowlist, rpm, tokens_per_day, max_streams, max_tokens, expires_at, created_at, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id`,
		req.TeamID, req.Name, secret.Display, secret.Hash, allowlistJSON(req.ModelAllowlist),
		nullIfZero(int64(req.RPM)), nullIfZero(req.TokensPerDay), nullIfZero(int64(req.MaxStreams)),
		nullIfZero(int64(req.MaxTokens)), nullTimeParam(req.ExpiresAt), now, by).Scan(&id)
	if err != nil {
		return adminwire.CreatedKey{}, fmt.Errorf("insert: %w", err)
	}
	if retake {
		if err := reRecordKeyCreate(ctx, tx, idemKey, fp, id, now); err != nil {
			return adminwire.CreatedKey{}, err
		}
	} else if idemKey != "" {
		if err := recordIdempotent(ctx, tx, scopeKeyCreate, idemKey, fp, id, now); err != nil {
			if store.IsUniqueViolation(err) {
				return adminwire.CreatedKey{}, errRaceLost
			}
			return adminwire.CreatedKey{}, err
		}
	}
	k, err := getKey(ctx, tx, id, "")
	if req.Key != "" {
		return adminwire.CreatedKey{Key: k}, err // the client has its secret
	}
	return adminwire.CreatedKey{Key: k, Secret: secret.Secret}, err
}

// repeatKeyCreate answers a repeat of a create under idemKey (answered).
// With no supplied secret, or the one the key has, it is a retry: the key,
// without a secret. With another supplied secret, the client lost the
// first one: the key is rotated to it. When the key was revoked since,
// retake asks for a new key that idemKey names from then on; a request
// other than the first (fp), for a key not revoked, is a conflict.
func (s *SQLStore) repeatKeyCreate(ctx context.Context, tx *sql.Tx, idemKey, fp, supplied string) (out adminwire.CreatedKey, answered, retake bool, err error) {
	id, err := lookupIdempotent(ctx, tx, scopeKeyCreate, idemKey, fp)
	switch {
	case isIdempotencyConflict(err):
		if revoked, err := keyRevoked(ctx, tx, id); err != nil || !revoked {
			return out, false, false, cmp.Or(err, ErrIdempotencyConflict)
		}
		return out, false, true, nil
	case err != nil || id == 0:
		return out, false, false, err
	}
	k, err := getKey(ctx, tx, id, s.db.Dialect().ForUpdate())
	if err != nil {
		return out, false, false, err
	}
	replay := adminwire.CreatedKey{Key: k, Replayed: true, SecretNote: adminwire.SecretNote}
	if supplied == "" {
		return replay, true, false, nil
	}
	var hash []byte
	if err := tx.QueryRowContext(ctx, "SELECT hash FROM api_keys WHERE id = $1", id).Scan(&hash); err != nil {
		return out, false, false, fmt.Errorf("read key hash: %w", err)
	}
	switch {
	case credential.EqualHash(hash, credential.HashKey(supplied)):
		return replay, true, false, nil
	case k.RevokedAt != nil:
		return out, false, true, nil
	}
	secret, err := newSecret(ctx, tx, supplied)
	if err == nil {
		err = setSecret(ctx, tx, id, secret)
	}
	if err != nil {
		return out, false, false, err
	}
	k.Prefix = secret.Display
	return adminwire.CreatedKey{Key: k, Replayed: true, Rotated: true}, true, false, nil
}

// reRecordKeyCreate moves the record of idemKey to key id, made by request
// fp in place of the revoked key it named.
func reRecordKeyCreate(ctx context.Context, tx *sql.Tx, idemKey, fp string, id int64, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE admin_idempotency SET fingerprint = $3, resource_id = $4, created_at = $5
		WHERE scope = $1 AND key = $2`, scopeKeyCreate, idemKey, fp, id, now); err != nil {
		return fmt.Errorf("re-record idempotency key: %w", err)
	}
	return nil
}

// keyRevoked reports whether key id is revoked (or gone).
func keyRevoked(ctx context.Context, tx *sql.Tx, id int64) (bool, error) {
	k, err := getKey(ctx, tx, id, "")
	if errors.Is(err, ErrNotFound) {
		return true, nil
	}
	return err == nil && k.RevokedAt != nil, err
}

// ForgetKeyCreate forgets the Idempotency-Keys key id was created under,
// for a client that has kept the key's secret: a later create under the
// same Idempotency-Key makes a new key instead of taking this one over.
// It returns the key; a missing key is ErrNotFound.
func (s *SQLStore) ForgetKeyCreate(ctx context.Context, id int64) (adminwire.Key, error) {
	var k adminwire.Key
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		if k, err = getKey(ctx, tx, id, ""); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM admin_idempotency WHERE scope = $1 AND resource_id = $2",
			scopeKeyCreate, id); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		return nil
	})
	if err != nil {
		return adminwire.Key{}, fmt.Errorf("forget key create: %w", err)
	}
	return k, nil
}

// newSecret is the key's secret: supplied by the client (checked unused),
// or generated.
func newSecret(ctx context.Context, q queryer, supplied string) (credential.Key, error) {
	if supplied == "" {
		k, err := credential.GenerateKey()
		if err != nil {
			return credential.Key{}, fmt.Errorf("generate key: %w", err)
		}
		return k, nil
	}
	k, err := credential.KeyFromSecret(supplied)
	if err != nil {
		return credential.Key{}, err
	}
	var one int
	err = q.QueryRowContext(ctx, "SELECT 1 FROM api_keys WHERE hash = $1", k.Hash).Scan(&one)
	switch {
	case err == nil:
		return credential.Key{}, ErrKeyInUse
	case !errors.Is(err, sql.ErrNoRows):
		return credential.Key{}, fmt.Errorf("check key: %w", err)
	}
	return k, nil
}

// GetKey returns the key with id, or ErrNotFound.
func (s *SQLStore) GetKey(ctx context.Context, id int64) (adminwire.Key, error) {
	return getKey(ctx, s.db, id, "")
}

// ListKeys returns the keys of the team with teamID (every key when
// teamID is 0), revoked ones included, oldest first.
func (s *SQLStore) ListKeys(ctx context.Context, teamID int64) ([]adminwire.Key, error) {
	q, args := "SELECT "+keyColumns+" FROM api_keys k ORDER BY k.id", []any(nil)
	if teamID != 0 {
		if err := teamExists(ctx, s.db, teamID); err != nil {
			return nil, err
		}
		q, args = "SELECT "+keyColumns+" FROM api_keys k WHERE k.team_id = $1 ORDER BY k.id", []any{teamID}
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	keys := []adminwire.Key{}
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return keys, nil
}

// UpdateKey applies patch to the key with id and returns the result.
func (s *SQLStore) UpdateKey(ctx context.Context, id int64, patch adminwire.UpdateKeyRequest) (adminwire.Key, error) {
	var k adminwire.Key
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		if k, err = getKey(ctx, tx, id, s.db.Dialect().ForUpdate()); err != nil {
			return err
		}
		applyKeyPatch(&k, patch)
		_, err = tx.ExecContext(ctx, `UPDATE api_keys SET name = $2, model_allowlist = $3, rpm = $4,
			tokens_per_day = $5, max_streams = $6, max_tokens = $7, expires_at = $8 WHERE id = $1`,
			id, k.Name, allowlistJSON(k.ModelAllowlist), nullIfZero(int64(k.RPM)), nullIfZero(k.TokensPerDay),
			nullIfZero(int64(k.MaxStreams)), nullIfZero(int64(k.MaxTokens)), nullTimeParam(k.ExpiresAt))
		if err != nil {
			return fmt.Errorf("update: %w", err)
		}
		return nil
	})
	if err != nil {
		return adminwire.Key{}, fmt.Errorf("update api key: %w", err)
	}
	return k, nil
}

// applyKeyPatch sets the fields patch carries.
func applyKeyPatch(k *adminwire.Key, p adminwire.UpdateKeyRequest) {
	if p.Name != nil {
		k.Name = *p.Name
	}
	if p.ModelAllowlist != nil {
		k.ModelAllowlist = append([]string{}, *p.ModelAllowlist...)
	}
	if p.RPM != nil {
		k.RPM = *p.RPM
	}
	if p.TokensPerDay != nil {
		k.TokensPerDay = *p.TokensPerDay
	}
	if p.MaxStreams != nil {
		k.MaxStreams = *p.MaxStreams
	}
	if p.MaxTokens != nil {
		k.MaxTokens = *p.MaxTokens
	}
	if p.ExpiresAt.Set {
		k.ExpiresAt = nil
		if p.ExpiresAt.Value != nil {
			t := p.ExpiresAt.Value.UTC()
			k.ExpiresAt = &t
		}
	}
}

// RotateKey gives the key with id a new secret, keeping its id, team and
// limits; the old secret stops matching as the transaction commits. A
// revoked key cannot be rotated (ErrKeyRevoked).
func (s *SQLStore) RotateKey(ctx context.Context, id int64, supplied string) (adminwire.CreatedKey, error) {
	var out adminwire.CreatedKey
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		k, err := getKey(ctx, tx, id, s.db.Dialect().ForUpdate())
		if err != nil {
			return err
		}
		if k.RevokedAt != nil {
			return fmt.Errorf("api key %d: %w", id, ErrKeyRevoked)
		}
		secret, err := newSecret(ctx, tx, supplied)
		if err != nil {
			return err
		}
		if err := setSecret(ctx, tx, id, secret); err != nil {
			return err
		}
		k.Prefix = secret.Display
		out = adminwire.CreatedKey{Key: k}
		if supplied == "" {
			out.Secret = secret.Secret
		}
		return nil
	})
	if err != nil {
		return adminwire.CreatedKey{}, fmt.Errorf("rotate api key: %w", err)
	}
	return out, nil
}

// setSecret gives key id the secret's hash and prefix.
func setSecret(ctx context.Context, tx *sql.Tx, id int64, secret credential.Key) error {
	if _, err := tx.ExecContext(ctx, "UPDATE api_keys SET hash = $2, prefix = $3 WHERE id = $1",
		id, secret.Hash, secret.Display); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	return nil
}

// RevokeKey marks the key with id revoked at now. Revoking a revoked key
// changes nothing and returns it as it is.
func (s *SQLStore) RevokeKey(ctx context.Context, id int64, now time.Time) (adminwire.Key, error) {
	return s.RevokeKeyBy(ctx, id, "", now)
}

// RevokeKeyBy is RevokeKey recording who revoked the key (by: the admin
// credential's subject) for the team's audit list.
func (s *SQLStore) RevokeKeyBy(ctx context.Context, id int64, by string, now time.Time) (adminwire.Key, error) {
	if _, err := s.db.ExecContext(ctx, "UPDATE api_keys SET revoked_at = $2, revoked_by = $3 WHERE id = $1 AND revoked_at IS NULL",
		id, now, by); err != nil {
		return adminwire.Key{}, fmt.Errorf("revoke api key: %w", err)
	}
	return getKey(ctx, s.db, id, "")
}
