package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"time"
)

// Role is what a principal may do beyond calling models.
type Role int

const (
	// RoleUser may call the OpenAI-compatible API within its limits. API
	// keys always carry RoleUser.
	RoleUser Role = iota
	// RoleAdmin may also call the admin API.
	RoleAdmin
)

// String returns the role's name as it appears in a JWT role claim.
func (r Role) String() string {
	switch r {
	case RoleUser:
		return "user"
	case RoleAdmin:
		return "admin"
	default:
		return "role(" + strconv.Itoa(int(r)) + ")"
	}
}

// Kind says which credential a principal presented.
type Kind int

const (
	// KindAPIKey is an llp_ API key looked up by its hash.
	KindAPIKey Kind = iota + 1
	// KindJWT is a JWT verified against the issuer's JWKS.
	KindJWT
	// KindAdminToken is the local mode's static bootstrap admin token.
	KindAdminToken
)

// String returns the kind's short name, as used in QuotaID.
func (k Kind) String() string {
	switch k {
	case KindAPIKey:
		return "key"
	case KindJWT:
		return "jwt"
	case KindAdminToken:
		return "admin"
	default:
		return "kind(" + strconv.Itoa(int(k)) + ")"
	}
}

// Limits are a caller's quotas. A zero value means unlimited for each
// number, and an empty ModelAllowlist allows every model.
type Limits struct {
	// ModelAllowlist names the models the caller may use; empty allows all.
	// It is shared with the key cache and must be treated as read-only.
	ModelAllowlist []string
	// RPM is the number of requests per minute.
	RPM int
	// TokensPerDay is the number of prompt plus completion tokens per UTC day.
	TokensPerDay int64
	// MaxStreams is the number of concurrent requests.
	MaxStreams int
	// MaxTokens caps the output of one request: a request that asks for
	// more, or names no max_tokens, is clamped to it.
	MaxTokens int
}

// Principal is a verified caller: who it is, what it may do and until when.
// The team always comes from the verified credential, never from the request.
type Principal struct {
	// Kind is the credential that was presented.
	Kind Kind
	// TeamID is the caller's team (0 for the bootstrap admin token and for
	// an admin JWT without a team claim).
	TeamID int64
	// TeamName is the team's name.
	TeamName string
	// KeyID is api_keys.id for an API key, 0 otherwise.
	KeyID int64
	// Subject names the caller without revealing its secret: the key's
	// display prefix, or the JWT's sub claim.
	Subject string
	// Role is RoleUser or RoleAdmin.
	Role Role
	// Limits are the caller's quotas.
	Limits Limits
	// ExpiresAt is when the credential stops working; zero means never.
	ExpiresAt time.Time
}

// QuotaID is the identity quotas are counted against: "key:<id>" for an
// API key; for a JWT or the bootstrap token, the kind and a hash of the
// subject ("jwt:<32 hex>"). A subject is the issuer's to choose — LDAP
// names carry spaces, commas and braces — and a hash makes any of them a
// safe Redis key, the same for the same subject on every gateway.
func (p Principal) QuotaID() string {
	switch p.Kind {
	case KindAPIKey:
		return "key:" + strconv.FormatInt(p.KeyID, 10)
	default:
		sum := sha256.Sum256([]byte(p.Subject))
		return p.Kind.String() + ":" + hex.EncodeToString(sum[:16])
	}
}

// AllowsModel reports whether the principal may use the model name. An
// empty allowlist allows every model.
func (p Principal) AllowsModel(name string) bool {
	return len(p.Limits.ModelAllowlist) == 0 || slices.Contains(p.Limits.ModelAllowlist, name)
}

// IsAdmin reports whether the principal may call the admin API.
func (p Principal) IsAdmin() bool { return p.Role == RoleAdmin }
