package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"

	"github.com/llmplat/llmplat/runtime/credential"
)

// AdminTokenPrefix starts generated bootstrap admin tokens; it differs
// from credential.KeyPrefix so that the token never takes the API key path.
const AdminTokenPrefix = "llpadm_"

// minAdminTokenLen is the shortest bootstrap token accepted: 32 characters
// carry enough randomness when generated, and rule out "admin" or "changeme".
const minAdminTokenLen = 32

// adminSubject names the bootstrap admin in logs and quota keys.
const adminSubject = "bootstrap"

// StaticAdminToken is the local mode's bootstrap credential: one secret,
// printed at startup, that yields an admin principal with no team. Only its
// hash is kept, and it is compared in constant time.
type StaticAdminToken struct {
	hash [sha256.Size]byte
}

// NewStaticAdminToken accepts token as the bootstrap admin credential.
func NewStaticAdminToken(token string) (*StaticAdminToken, error) {
	if len(token) < minAdminTokenLen {
		return nil, errors.New("auth: admin token must be at least 32 characters")
	}
	if credential.LooksLikeKey(token) {
		return nil, errors.New("auth: admin token must not look like an api key")
	}
	return &StaticAdminToken{hash: sha256.Sum256([]byte(token))}, nil
}

// GenerateAdminToken returns a new random bootstrap token: AdminTokenPrefix
// and 43 base62 digits (256 bits).
func GenerateAdminToken() (string, error) {
	k, err := credential.GenerateKey()
	if err != nil {
		return "", err
	}
	return AdminTokenPrefix + k.Secret[len(credential.KeyPrefix):], nil
}

// Match reports whether token is the bootstrap token. Comparing hashes
// keeps the time independent of both the content and the length.
func (s *StaticAdminToken) Match(token string) bool {
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], s.hash[:]) == 1
}

// Principal returns the bootstrap admin: RoleAdmin, TeamID 0, no limits.
func (s *StaticAdminToken) Principal() Principal {
	return Principal{Kind: KindAdminToken, Subject: adminSubject, Role: RoleAdmin}
}
