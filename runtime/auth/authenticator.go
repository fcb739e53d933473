package auth

import (
	"context"
	"fmt"
	"strings"

	"github.com/llmplat/llmplat/runtime/credential"
)

// maxCredentialBytes bounds a bearer credential: a JWT with many claims
// stays under 4 KiB, and anything larger costs parse time for nothing.
const maxCredentialBytes = 8 << 10

// bearerScheme is the only accepted authorization scheme (compared without
// regard to case, as RFC 9110 asks).
const bearerScheme = "bearer"

// Authenticator turns an Authorization header into a verified Principal.
// A credential shaped like an API key (credential.LooksLikeKey) goes to Keys, the
// bootstrap token to Admin, anything else to JWT. A nil field turns that
// path off.
type Authenticator struct {
	// Keys checks API keys.
	Keys *KeyCache
	// JWT verifies JWTs.
	JWT *JWTVerifier
	// Admin is the local mode's bootstrap admin token.
	Admin *StaticAdminToken
}

// Authenticate verifies the header "Bearer <api key or JWT>". It fails with
// ErrMissingCredential, ErrInvalidCredential, ErrExpired, ErrRevoked or
// ErrUnavailable (a dependency failed); no error contains the credential.
func (a *Authenticator) Authenticate(ctx context.Context, authorization string) (Principal, error) {
	cred, err := bearer(authorization)
	if err != nil {
		return Principal{}, err
	}
	switch {
	case a.Admin != nil && a.Admin.Match(cred):
		return a.Admin.Principal(), nil
	case credential.LooksLikeKey(cred):
		return a.authenticateKey(ctx, cred)
	case strings.HasPrefix(cred, credential.KeyPrefix):
		return Principal{}, fmt.Errorf("%w: malformed api key", ErrInvalidCredential)
	case strings.Count(cred, ".") == 2 && a.JWT != nil:
		return a.JWT.Verify(ctx, cred)
	default:
		return Principal{}, fmt.Errorf("%w: neither an api key nor a jwt", ErrInvalidCredential)
	}
}

// authenticateKey checks an API key through the cache.
func (a *Authenticator) authenticateKey(ctx context.Context, key string) (Principal, error) {
	if a.Keys == nil {
		return Principal{}, fmt.Errorf("%w: api keys are not accepted", ErrInvalidCredential)
	}
	rec, err := a.Keys.Lookup(ctx, credential.HashKey(key))
	if err != nil {
		return Principal{}, err
	}
	return Principal{
		Kind: KindAPIKey, TeamID: rec.TeamID, TeamName: rec.TeamName, KeyID: rec.ID,
		Subject: rec.Prefix, Role: RoleUser, Limits: rec.Limits, ExpiresAt: rec.ExpiresAt,
	}, nil
}

// bearer extracts the credential of a "Bearer <credential>" header.
func bearer(header string) (string, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return "", ErrMissingCredential
	}
	scheme, cred, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, bearerScheme) {
		return "", fmt.Errorf("%w: authorization scheme is not bearer", ErrInvalidCredential)
	}
	cred = strings.TrimSpace(cred)
	switch {
	case cred == "":
		return "", ErrMissingCredential
	case len(cred) > maxCredentialBytes:
		return "", fmt.Errorf("%w: credential too long", ErrInvalidCredential)
	}
	return cred, nil
}
