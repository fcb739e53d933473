package console_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/console"
)

// TestPersonalKeyFromJWT: a member signed in with a team JWT makes a
// personal key within the limits the gateway gives JWT callers (their
// model allowlist and rpm), and the key names the JWT's subject as its
// maker; a higher rpm or another model is refused.
func TestPersonalKeyFromJWT(t *testing.T) {
	const issuer, audience, kid = "https://issuer.test", "llmplat", "k1"
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	}))
	t.Cleanup(jwks.Close)
	ctx := context.Background()
	db, dir, l := openDatabase(t)
	for _, m := range []string{"llama-8b", "qwen-32b"} {
		if _, _, err := dir.PutModel(ctx, m, adminwire.ModelSpec{ServedName: m, MaxContextTokens: 8192, MaxOutputTokens: 4096}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	team, _, err := dir.CreateTeam(ctx, "alpha", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	on := true
	if _, err := dir.SetSelfService(ctx, team.ID, &on, nil); err != nil {
		t.Fatal(err)
	}
	verifier, err := auth.NewJWTVerifier(auth.JWTConfig{JWKSURL: jwks.URL, Issuer: issuer, Audience: audience,
		Teams:  auth.NewMemTeamStore(map[string]int64{"alpha": team.ID}),
		Limits: auth.Limits{ModelAllowlist: []string{"llama-8b"}, RPM: 100}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(verifier.Close)
	base := serveConsole(t, console.Config{Authenticate: (&auth.Authenticator{JWT: verifier}).Authenticate,
		Ledger: l, DB: db, Directory: dir, SelfService: dir})
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": "alice", "team": "alpha", "role": "user",
		"iss": issuer, "aud": audience, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	tok.Header["kid"] = kid
	signed, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	client, csrf := formClient(t, base)
	if got := postSignIn(t, client, base, csrf, signed); got != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", got)
	}
	cookie := jarSession(t, client, base)
	token := sessionToken(t, base, cookie)
	form := func(rpm, model string) url.Values {
		return url.Values{"csrf": {token}, "name": {"alice-notebook"}, "days": {"7"}, "rpm": {rpm}, "model": {model}}
	}
	tests := []struct {
		name       string
		form       url.Values
		wantStatus int
		wantText   string
	}{
		{"an rpm above the JWT's", form("101", "llama-8b"), http.StatusBadRequest, "at most 100"},
		{"a model the JWT may not use", form("50", "qwen-32b"), http.StatusBadRequest, "not one your own"},
		{"within the JWT's limits", form("50", "llama-8b"), http.StatusCreated, `id="secret">llp_`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := postForm(t, base, "/console/keys", cookie, tt.form, "")
			if status != tt.wantStatus || !strings.Contains(body, tt.wantText) {
				t.Errorf("status %d, want %d with %q:\n%s", status, tt.wantStatus, tt.wantText, body)
			}
		})
	}
	keys, err := dir.ListKeys(ctx, team.ID)
	if err != nil || len(keys) != 1 {
		t.Fatalf("alpha's keys: %+v %v, want the one made", keys, err)
	}
	if k := keys[0]; k.CreatedBy != "alice" || k.Origin != adminwire.KeyOriginConsole || k.RPM != 50 || !slices.Equal(k.ModelAllowlist, []string{"llama-8b"}) {
		t.Errorf("the key %+v: want made by alice in the console, 50 rpm, llama-8b only", k)
	}
}
