package admin

import (
	"errors"
	"fmt"
)

// Errors of the SQL stores, classified by the handlers with errors.Is.
var (
	// ErrNotFound means the team, key, model, node or token does not exist.
	ErrNotFound = errors.New("admin: not found")
	// ErrTeamNotFound means a request names a team that does not exist; it
	// wraps ErrNotFound.
	ErrTeamNotFound = fmt.Errorf("%w: team", ErrNotFound)
	// ErrAlreadyExists means a create-only request named a team or model
	// the platform already has.
	ErrAlreadyExists = errors.New("admin: already exists")
	// ErrNameTaken means another team already has the name.
	ErrNameTaken = errors.New("admin: name taken")
	// ErrIdempotencyConflict means an Idempotency-Key was reused for a
	// different request.
	ErrIdempotencyConflict = errors.New("admin: idempotency key reused with a different request")
	// ErrKeyRevoked means the operation needs a key that is not revoked.
	ErrKeyRevoked = errors.New("admin: api key revoked")
	// ErrKeyInUse means a client-minted secret is already some key's.
	ErrKeyInUse = errors.New("admin: key secret already in use")
	// ErrNodeTokenInUse means a client-minted node token was already
	// issued.
	ErrNodeTokenInUse = errors.New("admin: node token already in use")
	// ErrMalformedNodeToken means a client-minted node token has not the
	// shape of a generated one (the prefix and 43 base62 characters).
	ErrMalformedNodeToken = errors.New("admin: malformed node token")
	// ErrInvalidNodeToken means a node presented a token that is unknown,
	// belongs to another node, or was revoked.
	ErrInvalidNodeToken = errors.New("admin: invalid node token")
	// ErrNodeTokenRevoked means the node token was revoked; Verify wraps it
	// together with ErrInvalidNodeToken.
	ErrNodeTokenRevoked = errors.New("admin: node token revoked")
	// ErrNodeNotFound is what a Drainer wraps when it does not know the
	// node; it wraps ErrNotFound.
	ErrNodeNotFound = fmt.Errorf("%w: node", ErrNotFound)
)
