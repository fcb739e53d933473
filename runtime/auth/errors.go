package auth

import "errors"

// The errors of Authenticate. The gateway classifies them with errors.Is and
// answers in the OpenAI error shape. None of them ever contains the
// credential that was presented.
var (
	// ErrMissingCredential means the request carried no bearer credential
	// (401).
	ErrMissingCredential = errors.New("auth: missing credential")
	// ErrInvalidCredential means the credential is unknown, malformed or
	// fails verification (401).
	ErrInvalidCredential = errors.New("auth: invalid credential")
	// ErrExpired means the credential was valid but has expired (401, with a
	// message saying so).
	ErrExpired = errors.New("auth: credential expired")
	// ErrRevoked means the API key was revoked (401).
	ErrRevoked = errors.New("auth: credential revoked")
	// ErrUnavailable means the credential could not be checked because a
	// dependency (the key store, the team store, the JWKS endpoint) failed;
	// the caller is not at fault (503).
	ErrUnavailable = errors.New("auth: credential check unavailable")
)
