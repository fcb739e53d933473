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
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/console"
)

// TestSignInWithJWT: a JWT the gateway accepts signs in to the console
// as the API would take it: a team's token to that team's pages, an
// admin-role token to the platform pages; a token of another issuer is
// refused.
func TestSignInWithJWT(t *testing.T) {
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
	db, dir, l := openDatabase(t)
	team, _, err := dir.CreateTeam(context.Background(), "alpha", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := auth.NewJWTVerifier(auth.JWTConfig{JWKSURL: jwks.URL, Issuer: issuer, Audience: audience,
		Teams: auth.NewMemTeamStore(map[string]int64{"alpha": team.ID})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(verifier.Close)
	base := serveConsole(t, console.Config{Authenticate: (&auth.Authenticator{JWT: verifier}).Authenticate,
		Ledger: l, DB: db, Directory: dir})
	token := func(iss string, claims jwt.MapClaims) string {
		now := time.Now()
		claims["iss"], claims["aud"], claims["iat"], claims["exp"] = iss, audience, now.Unix(), now.Add(time.Hour).Unix()
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		name       string
		jwt        string
		wantStatus int
		wantPage   string // where the signed-in browser lands
		wantText   string
	}{
		{"a team's token opens the team's pages", token(issuer, jwt.MapClaims{"sub": "alice", "team": "alpha", "role": "user"}),
			http.StatusSeeOther, "/console/usage", `<b id="team-name">alpha</b>`},
		{"an admin-role token opens the platform pages", token(issuer, jwt.MapClaims{"sub": "ops", "role": "admin"}),
			http.StatusSeeOther, "/console/platform/nodes", "No node has registered yet."},
		{"another issuer's token is refused", token("https://elsewhere.test", jwt.MapClaims{"sub": "mallory", "team": "alpha"}),
			http.StatusUnauthorized, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, csrf := formClient(t, base)
			if got := postSignIn(t, client, base, csrf, tt.jwt); got != tt.wantStatus {
				t.Fatalf("sign-in: %d, want %d", got, tt.wantStatus)
			}
			if tt.wantPage == "" {
				return
			}
			cookie := jarSession(t, client, base)
			homeResp, _ := get(t, base, "/console/", cookie)
			home := homeResp.Header.Get("Location")
			resp, body := get(t, base, tt.wantPage, cookie)
			if resp.StatusCode != http.StatusOK || home != tt.wantPage || !strings.Contains(body, tt.wantText) {
				t.Errorf("home sends to %q; %s: %d, want 200 with %q:\n%s", home, tt.wantPage, resp.StatusCode, tt.wantText, body)
			}
			if strings.Contains(body, tt.jwt) {
				t.Error("the page shows the token")
			}
		})
	}
}
