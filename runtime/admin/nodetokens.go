package admin

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/credential"
	"github.com/llmplat/llmplat/runtime/store"
)

// nodeTokenFromSecret is the hash of a client-minted token; the token must
// have the shape of a generated one.
func nodeTokenFromSecret(token string) ([]byte, error) {
	if !credential.LooksLikeNodeToken(token) {
		return nil, ErrMalformedNodeToken
	}
	return credential.HashKey(token), nil
}

// SQLNodeTokens keeps per-node tokens in the node_tokens table: only their
// hashes, and when they were revoked.
type SQLNodeTokens struct {
	db  *store.DB
	idm *idempotency
}

// NewSQLNodeTokens returns node tokens over db, which must be migrated.
func NewSQLNodeTokens(db *store.DB) *SQLNodeTokens {
	return &SQLNodeTokens{db: db, idm: newIdempotency(db)}
}

// nodeTokenColumns are the node_tokens columns scanNodeToken reads.
const nodeTokenColumns = "id, node_id, created_at, revoked_at"

// scanNodeToken reads one token selected with nodeTokenColumns.
func scanNodeToken(r rowScanner) (adminwire.NodeToken, error) {
	var (
		t       adminwire.NodeToken
		revoked sql.NullTime
	)
	if err := r.Scan(&t.ID, &t.NodeID, &t.CreatedAt, &revoked); err != nil {
		return adminwire.NodeToken{}, err
	}
	t.CreatedAt, t.RevokedAt = t.CreatedAt.UTC(), nullTime(revoked)
	return t, nil
}

// getNodeToken reads the token with id through q.
func getNodeToken(ctx context.Context, q queryer, id int64) (adminwire.NodeToken, error) {
	t, err := scanNodeToken(q.QueryRowContext(ctx, "SELECT "+nodeTokenColumns+" FROM node_tokens WHERE id = $1", id))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return adminwire.NodeToken{}, fmt.Errorf("node token %d: %w", id, ErrNotFound)
	case err != nil:
		return adminwire.NodeToken{}, fmt.Errorf("read node token: %w", err)
	}
	return t, nil
}

// Issue creates a token for nodeID, which need not have registered yet,
// and returns it with its secret. With a non-empty idemKey, a repeat for
// the same node returns the first token without its secret (Replayed).
func (s *SQLNodeTokens) Issue(ctx context.Context, nodeID, idemKey string, now time.Time) (adminwire.IssuedNodeToken, error) {
	return s.issue(ctx, nodeID, nil, idemKey, now)
}

// IssueMinted is Issue for a token the client minted: it is stored by its
// hash and not answered, so the secret never travels back and a lost
// answer loses nothing. A token of the wrong shape is
// ErrMalformedNodeToken, one already issued ErrNodeTokenInUse.
func (s *SQLNodeTokens) IssueMinted(ctx context.Context, nodeID, token, idemKey string, now time.Time) (adminwire.IssuedNodeToken, error) {
	hash, err := nodeTokenFromSecret(token)
	if err != nil {
		return adminwire.IssuedNodeToken{}, fmt.Errorf("issue node token: %w", err)
	}
	return s.issue(ctx, nodeID, hash, idemKey, now)
}

// issue is Issue with a generated token (hash nil) or IssueMinted.
func (s *SQLNodeTokens) issue(ctx context.Context, nodeID string, hash []byte, idemKey string, now time.Time) (adminwire.IssuedNodeToken, error) {
	// A supplied token counts in the fingerprint by its hash only.
	fp := fingerprint(struct {
		NodeID string `json:"node_id"`
		Hash   string `json:"hash,omitempty"`
	}{nodeID, hex.EncodeToString(hash)})
	var out adminwire.IssuedNodeToken
	err := runIdempotent(func() error {
		return s.db.InTx(ctx, func(tx *sql.Tx) error {
			var err error
			out, err = s.issueTx(ctx, tx, nodeID, hash, idemKey, fp, now)
			return err
		})
	})
	if err != nil {
		return adminwire.IssuedNodeToken{}, fmt.Errorf("issue node token: %w", err)
	}
	return out, nil
}

// issueTx is Issue's transaction.
func (s *SQLNodeTokens) issueTx(ctx context.Context, tx *sql.Tx, nodeID string, supplied []byte, idemKey, fp string, now time.Time) (adminwire.IssuedNodeToken, error) {
	if idemKey != "" {
		id, err := lookupIdempotent(ctx, tx, scopeNodeToken, idemKey, fp)
		if err != nil {
			return adminwire.IssuedNodeToken{}, err
		}
		if id != 0 {
			t, err := getNodeToken(ctx, tx, id)
			return adminwire.IssuedNodeToken{NodeToken: t, Replayed: true, SecretNote: adminwire.SecretNote}, err
		}
	}
	token, hash, err := newNodeToken(ctx, tx, supplied)
	if err != nil {
		return adminwire.IssuedNodeToken{}, err
	}
	t, err := scanNodeToken(tx.QueryRowContext(ctx, `INSERT INTO node_tokens (node_id, hash, created_at)
		VALUES ($1, $2, $3) RETURNING `+nodeTokenColumns, nodeID, hash, now))
	if err != nil {
		return adminwire.IssuedNodeToken{}, fmt.Errorf("insert: %w", err)
	}
	if idemKey != "" {
		if err := recordIdempotent(ctx, tx, scopeNodeToken, idemKey, fp, t.ID, now); err != nil {
			if store.IsUniqueViolation(err) {
				return adminwire.IssuedNodeToken{}, errRaceLost
			}
			return adminwire.IssuedNodeToken{}, err
		}
	}
	return adminwire.IssuedNodeToken{NodeToken: t, Token: token}, nil
}

// newNodeToken is a generated token and its hash, or, when supplied (a
// client-minted token's hash) is set, no token and that hash, once checked
// unused.
func newNodeToken(ctx context.Context, q queryer, supplied []byte) (string, []byte, error) {
	if supplied == nil {
		return credential.GenerateNodeToken()
	}
	var one int
	err := q.QueryRowContext(ctx, "SELECT 1 FROM node_tokens WHERE hash = $1", supplied).Scan(&one)
	switch {
	case err == nil:
		return "", nil, ErrNodeTokenInUse
	case !errors.Is(err, sql.ErrNoRows):
		return "", nil, fmt.Errorf("check node token: %w", err)
	}
	return "", supplied, nil
}

// List returns the tokens of nodeID, revoked ones included, oldest first.
func (s *SQLNodeTokens) List(ctx context.Context, nodeID string) ([]adminwire.NodeToken, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+nodeTokenColumns+" FROM node_tokens WHERE node_id = $1 ORDER BY id", nodeID)
	if err != nil {
		return nil, fmt.Errorf("list node tokens: %w", err)
	}
	defer rows.Close()
	tokens := []adminwire.NodeToken{}
	for rows.Next() {
		t, err := scanNodeToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list node tokens: %w", err)
		}
		tokens = append(tokens, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list node tokens: %w", err)
	}
	return tokens, nil
}

// Revoke marks the token with id revoked at now and records a revoke event
// for its node, in one transaction. It reports whether this call revoked
// it: revoking a revoked token changes nothing.
func (s *SQLNodeTokens) Revoke(ctx context.Context, id int64, now time.Time) (adminwire.NodeToken, bool, error) {
	var (
		t       adminwire.NodeToken
		changed bool
	)
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE node_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL", id, now)
		if err != nil {
			return fmt.Errorf("update: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("update: %w", err)
		}
		if t, err = getNodeToken(ctx, tx, id); err != nil {
			return err
		}
		if changed = n == 1; !changed {
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO node_events (node_id, kind, detail, created_at)
			VALUES ($1, 'revoke', $2, $3)`, t.NodeID, "node token "+strconv.FormatInt(id, 10)+" revoked", now)
		if err != nil {
			return fmt.Errorf("record revoke event: %w", err)
		}
		return nil
	})
	if err != nil {
		return adminwire.NodeToken{}, false, fmt.Errorf("revoke node token: %w", err)
	}
	return t, changed, nil
}

// Verify checks the token a node presents at registration. It returns nil
// only for a token issued to nodeID and not revoked; otherwise an error
// wrapping ErrInvalidNodeToken (and ErrNodeTokenRevoked for a revoked
// one). The token is never part of an error.
func (s *SQLNodeTokens) Verify(ctx context.Context, nodeID, token string) error {
	if !credential.LooksLikeNodeToken(token) {
		return fmt.Errorf("%w: malformed token for node %q", ErrInvalidNodeToken, nodeID)
	}
	var (
		owner   string
		revoked sql.NullTime
	)
	err := s.db.QueryRowContext(ctx, "SELECT node_id, revoked_at FROM node_tokens WHERE hash = $1",
		credential.HashKey(token)).Scan(&owner, &revoked)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: unknown token for node %q", ErrInvalidNodeToken, nodeID)
	case err != nil:
		return fmt.Errorf("verify node token: %w", err)
	case owner != nodeID:
		return fmt.Errorf("%w: token of another node presented by %q", ErrInvalidNodeToken, nodeID)
	case revoked.Valid:
		return fmt.Errorf("%w: %w", ErrInvalidNodeToken, ErrNodeTokenRevoked)
	}
	return nil
}
