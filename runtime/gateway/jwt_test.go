package gateway_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/gateway"
	oa "github.com/llmplat/llmplat/runtime/openai"
)

// issuer is a local JWKS endpoint with one RSA key, which can go down.
type issuer struct {
	key  *rsa.PrivateKey
	down atomic.Bool
	srv  *httptest.Server
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key}
	doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
		"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if is.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(doc)
	}))
	t.Cleanup(is.srv.Close)
	return is
}

// token signs a JWT for sub in team with kid.
func (is *issuer) token(t *testing.T, kid, sub, team string) string {
	t.Helper()
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": "test-idp", "aud": "llmplat", "sub": sub, "team": team,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(is.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJWTCallers: a JWT whose subject is an LDAP name (spaces, commas,
// braces) is served under its limits; with the issuer down, a token with a
// key id the gateway has not seen gets 503 auth_unavailable with a
// Retry-After, not 401, while tokens with the cached key go on.
func TestJWTCallers(t *testing.T) {
	s := newStack(t, stackOpts{})
	teamID := s.team("alpha", 10*credit)
	is := newIssuer(t)
	v, err := auth.NewJWTVerifier(auth.JWTConfig{JWKSURL: is.srv.URL + "/jwks", Issuer: "test-idp", Audience: "llmplat",
		Teams: auth.NewMemTeamStore(map[string]int64{"alpha": teamID}), Limits: auth.Limits{RPM: 100, MaxStreams: 2, TokensPerDay: 1_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	base := s.gateway(func(cfg *gateway.Config) { cfg.Auth = &auth.Authenticator{JWT: v} })

	ldap := is.token(t, "k1", "CN=Jane Doe,OU=ML {lab}", "alpha")
	resp, err := s.post(t.Context(), base, ldap, chatBody("llama-8b", false, 5))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Ratelimit-Limit-Requests") != "100" {
		t.Fatalf("LDAP-named caller: %d (limit header %q), want 200 under its limits", resp.StatusCode, resp.Header.Get("X-Ratelimit-Limit-Requests"))
	}
	if r := s.waitRow(resp.Header.Get("X-Request-Id")); r.status != "settled" {
		t.Errorf("row %+v, want settled", r)
	}

	is.down.Store(true)
	resp, err = s.post(t.Context(), base, is.token(t, "k2", "bob", "alpha"), chatBody("llama-8b", false, 5))
	if err != nil {
		t.Fatal(err)
	}
	var e oa.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code == nil || retry <= 0 {
		t.Errorf("new kid with the issuer down: %d %+v (Retry-After %q), want 503 auth_unavailable with Retry-After",
			resp.StatusCode, e.Error, resp.Header.Get("Retry-After"))
	}
	resp, err = s.post(t.Context(), base, ldap, chatBody("llama-8b", false, 5))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("cached key with the issuer down: %d, want 200", resp.StatusCode)
	}
}
