package auth

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

const (
	testIssuer   = "https://issuer.test"
	testAudience = "llmplat"
	testTeamID   = 7
)

// testJWTLimits are the JWT callers' limits in these tests.
var testJWTLimits = Limits{ModelAllowlist: []string{"llama-8b"}, RPM: 60, TokensPerDay: 100_000, MaxStreams: 4}

// jwtFixture is a verifier against a JWKS server holding rsaA as "rsa-a"
// and ecA as "ec-a".
type jwtFixture struct {
	clock    *testingclock.FakeClock
	server   *jwksServer
	verifier *JWTVerifier
	teams    *MemTeamStore
	logs     *testenv.Buffer
	// failures counts the failed JWKS fetches reported to OnJWKSFailure.
	failures atomic.Int64
}

func newJWTFixture(t *testing.T) *jwtFixture {
	t.Helper()
	k := testKeys()
	f := &jwtFixture{
		clock:  newFakeClock(),
		server: newJWKSServer(t, rsaJWK("rsa-a", "RS256", &k.rsaA.PublicKey), ecJWK("ec-a", &k.ecA.PublicKey)),
		teams:  NewMemTeamStore(map[string]int64{"ml": testTeamID}),
		logs:   &testenv.Buffer{},
	}
	v, err := NewJWTVerifier(JWTConfig{
		JWKSURL: f.server.URL(), Issuer: testIssuer, Audience: testAudience,
		Limits: testJWTLimits, Teams: f.teams, HTTPClient: f.server.srv.Client(),
		Clock: f.clock, Logger: slog.New(slog.NewTextHandler(f.logs, nil)),
		OnJWKSFailure: func() { f.failures.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.verifier = v
	return f
}

// claims returns valid claims at now, changed by edit.
func (f *jwtFixture) claims(edit func(jwt.MapClaims)) jwt.MapClaims {
	now := f.clock.Now()
	c := jwt.MapClaims{
		"iss": testIssuer, "aud": testAudience, "sub": "alice", "team": "ml", "role": "user",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	if edit != nil {
		edit(c)
	}
	return c
}

// sign returns a token over claims with kid in its header ("" for none).
func sign(t *testing.T, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWTVerify(t *testing.T) {
	k := testKeys()
	f := newJWTFixture(t)
	now := f.clock.Now()
	rsaPubDER, err := x509.MarshalPKIXPublicKey(&k.rsaA.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(key string, v any) func(jwt.MapClaims) {
		return func(c jwt.MapClaims) {
			if v == nil {
				delete(c, key)
				return
			}
			c[key] = v
		}
	}
	rs := func(kid string, e func(jwt.MapClaims)) string {
		return sign(t, jwt.SigningMethodRS256, k.rsaA, kid, f.claims(e))
	}
	tests := []struct {
		name     string
		token    string
		wantErr  error
		wantRole Role
		wantTeam int64
		wantExp  time.Time // zero: an hour from now
	}{
		{name: "rsa", token: rs("rsa-a", nil), wantTeam: testTeamID},
		{name: "ecdsa admin", token: sign(t, jwt.SigningMethodES256, k.ecA, "ec-a", f.claims(edit("role", "admin"))), wantRole: RoleAdmin, wantTeam: testTeamID},
		{name: "role array with admin", token: rs("rsa-a", edit("role", []string{"reader", "admin"})), wantRole: RoleAdmin, wantTeam: testTeamID},
		{name: "admin without team", token: rs("rsa-a", func(c jwt.MapClaims) { c["role"] = "admin"; delete(c, "team") }), wantRole: RoleAdmin},
		{name: "audience array", token: rs("rsa-a", edit("aud", []string{"other", testAudience})), wantTeam: testTeamID},
		{name: "expired within leeway", token: rs("rsa-a", edit("exp", now.Add(-10*time.Second).Unix())), wantTeam: testTeamID, wantExp: now.Add(-10 * time.Second)},
		{name: "user without team", token: rs("rsa-a", edit("team", nil)), wantErr: ErrInvalidCredential},
		{name: "unknown team", token: rs("rsa-a", edit("team", "nobody")), wantErr: ErrInvalidCredential},
		{name: "no sub", token: rs("rsa-a", edit("sub", nil)), wantErr: ErrInvalidCredential},
		{name: "expired", token: rs("rsa-a", edit("exp", now.Add(-time.Minute).Unix())), wantErr: ErrExpired},
		{name: "expired and wrong issuer", token: rs("rsa-a", func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix(); c["iss"] = "https://evil.test" }), wantErr: ErrInvalidCredential},
		{name: "no exp", token: rs("rsa-a", edit("exp", nil)), wantErr: ErrInvalidCredential},
		{name: "not yet valid", token: rs("rsa-a", edit("nbf", now.Add(5*time.Minute).Unix())), wantErr: ErrInvalidCredential},
		{name: "issued in the future", token: rs("rsa-a", edit("iat", now.Add(5*time.Minute).Unix())), wantErr: ErrInvalidCredential},
		{name: "wrong issuer", token: rs("rsa-a", edit("iss", "https://evil.test")), wantErr: ErrInvalidCredential},
		{name: "wrong audience", token: rs("rsa-a", edit("aud", "someone-else")), wantErr: ErrInvalidCredential},
		{name: "no audience", token: rs("rsa-a", edit("aud", nil)), wantErr: ErrInvalidCredential},
		{name: "bad signature", token: sign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-a", f.claims(nil)), wantErr: ErrInvalidCredential},
		{name: "tampered claims", token: tamper(t, rs("rsa-a", nil)), wantErr: ErrInvalidCredential},
		{name: "alg none", token: sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "rsa-a", f.claims(nil)), wantErr: ErrInvalidCredential},
		{name: "hs256 keyed with the public key", token: sign(t, jwt.SigningMethodHS256, rsaPubDER, "rsa-a", f.claims(nil)), wantErr: ErrInvalidCredential},
		{name: "es256 under an rsa kid", token: sign(t, jwt.SigningMethodES256, k.ecA, "rsa-a", f.claims(nil)), wantErr: ErrInvalidCredential},
		{name: "rs256 under an ec kid", token: sign(t, jwt.SigningMethodRS256, k.rsaA, "ec-a", f.claims(nil)), wantErr: ErrInvalidCredential},
		{name: "ps256", token: sign(t, jwt.SigningMethodPS256, k.rsaA, "rsa-a", f.claims(nil)), wantErr: ErrInvalidCredential},
		{name: "no kid", token: rs("", nil), wantErr: ErrInvalidCredential},
		{name: "malformed", token: "abc.def.ghi", wantErr: ErrInvalidCredential},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.verifier.Verify(context.Background(), tt.token)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Verify error = %v, want %v", err, tt.wantErr)
				}
				if tt.wantErr == ErrInvalidCredential && errors.Is(err, ErrExpired) {
					t.Fatalf("Verify error = %v, must not say expired", err)
				}
				assertNoEcho(t, err.Error(), tt.token)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			want := Principal{
				Kind: KindJWT, TeamID: tt.wantTeam, Subject: "alice", Role: tt.wantRole,
				Limits: testJWTLimits, ExpiresAt: tt.wantExp,
			}
			if want.ExpiresAt.IsZero() {
				want.ExpiresAt = now.Add(time.Hour)
			}
			if tt.wantTeam != 0 {
				want.TeamName = "ml"
			}
			if !principalsEqual(got, want) {
				t.Errorf("Verify = %+v, want %+v", got, want)
			}
			if want := (Principal{Kind: KindJWT, Subject: "alice"}).QuotaID(); got.QuotaID() != want {
				t.Errorf("QuotaID = %q, want %q", got.QuotaID(), want)
			}
		})
	}
	if got := f.server.hits.Load(); got != 1 {
		t.Errorf("jwks fetches = %d, want 1 (every kid was known)", got)
	}
}

// tamper changes the sub claim of a signed token, keeping its signature.
func tamper(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	claims, err := jwt.NewParser().DecodeSegment(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	parts[1] = b64(bytes.Replace(claims, []byte(`"alice"`), []byte(`"mallory"`), 1))
	return strings.Join(parts, ".")
}

func TestJWTTeamLookupsAreCached(t *testing.T) {
	f := newJWTFixture(t)
	tok := sign(t, jwt.SigningMethodRS256, testKeys().rsaA, "rsa-a", f.claims(nil))
	for range 10 {
		if _, err := f.verifier.Verify(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.teams.Lookups(); got != 1 {
		t.Errorf("team lookups = %d, want 1", got)
	}
}

func TestJWTUnknownKidRefetchesOnce(t *testing.T) {
	f := newJWTFixture(t)
	k := testKeys()
	good := sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", f.claims(nil))
	ghost := sign(t, jwt.SigningMethodRS256, k.rsaA, "ghost", f.claims(nil))
	steps := []struct {
		name      string
		token     string
		advance   time.Duration
		wantErr   error
		wantFetch int64
	}{
		{name: "first use fetches", token: good, wantFetch: 1},
		{name: "unknown kid refetches", token: ghost, wantErr: ErrInvalidCredential, wantFetch: 2},
		{name: "again at once does not", token: ghost, wantErr: ErrInvalidCredential, wantFetch: 2},
		{name: "just before the interval does not", token: ghost, advance: DefaultMinRefetchInterval - time.Second, wantErr: ErrInvalidCredential, wantFetch: 2},
		{name: "after the interval refetches", token: ghost, advance: time.Second, wantErr: ErrInvalidCredential, wantFetch: 3},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			f.clock.Step(s.advance)
			_, err := f.verifier.Verify(context.Background(), s.token)
			if !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
				t.Fatalf("Verify error = %v, want %v", err, s.wantErr)
			}
			if got := f.server.hits.Load(); got != s.wantFetch {
				t.Errorf("jwks fetches = %d, want %d", got, s.wantFetch)
			}
		})
	}
}

func TestJWTRandomKidFlood(t *testing.T) {
	const tokens, workers = 1000, 8
	f := newJWTFixture(t)
	k := testKeys()
	good := sign(t, jwt.SigningMethodES256, k.ecA, "ec-a", f.claims(nil))
	if _, err := f.verifier.Verify(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	// Signing is the slow part: make the tokens first, then flood.
	flood := make([]string, tokens)
	for i := range flood {
		flood[i] = sign(t, jwt.SigningMethodES256, k.ecA, fmt.Sprintf("kid-%016x", rand.Uint64()), f.claims(nil))
	}
	for round, wantFetches := range []int64{2, 3} {
		var wg sync.WaitGroup
		errs := make([]error, tokens)
		for w := range workers {
			wg.Go(func() {
				for i := w; i < tokens; i += workers {
					_, errs[i] = f.verifier.Verify(context.Background(), flood[i])
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, ErrInvalidCredential) {
				t.Fatalf("round %d token %d: error = %v, want ErrInvalidCredential", round, i, err)
			}
		}
		if got := f.server.hits.Load(); got != wantFetches {
			t.Fatalf("round %d: jwks fetches = %d, want %d (one refetch per MinRefetchInterval)", round, got, wantFetches)
		}
		if _, err := f.verifier.Verify(context.Background(), good); err != nil {
			t.Fatalf("round %d: a good token failed during the flood: %v", round, err)
		}
		f.clock.Step(DefaultMinRefetchInterval)
	}
}

func TestJWTKeyRotation(t *testing.T) {
	f := newJWTFixture(t)
	k := testKeys()
	oldTok := func() string { return sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", f.claims(nil)) }
	newTok := func() string { return sign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-b", f.claims(nil)) }
	if _, err := f.verifier.Verify(context.Background(), oldTok()); err != nil {
		t.Fatal(err)
	}
	// The issuer publishes a new key and retires the old one.
	f.server.setKeys(rsaJWK("rsa-b", "RS256", &k.rsaB.PublicKey))
	steps := []struct {
		name      string
		token     func() string
		advance   time.Duration
		wantErr   error
		wantFetch int64
	}{
		{name: "new kid accepted after a refetch", token: newTok, wantFetch: 2},
		{name: "old kid gone after that refetch", token: oldTok, advance: DefaultMinRefetchInterval, wantErr: ErrInvalidCredential, wantFetch: 3},
		{name: "new kid served from the cache", token: newTok, wantFetch: 3},
		{name: "periodic refresh", token: newTok, advance: DefaultRefreshInterval, wantFetch: 4},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			f.clock.Step(s.advance)
			_, err := f.verifier.Verify(context.Background(), s.token())
			if !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
				t.Fatalf("Verify error = %v, want %v", err, s.wantErr)
			}
			f.verifier.Close() // a due refresh runs in the background
			if got := f.server.hits.Load(); got != s.wantFetch {
				t.Errorf("jwks fetches = %d, want %d", got, s.wantFetch)
			}
		})
	}
}

func TestJWKSOutage(t *testing.T) {
	f := newJWTFixture(t)
	tok := func() string { return sign(t, jwt.SigningMethodRS256, testKeys().rsaA, "rsa-a", f.claims(nil)) }
	f.server.setFail(true)
	steps := []struct {
		name      string
		advance   time.Duration
		fail      bool
		wantErr   error
		wantFetch int64
	}{
		{name: "down at first use", fail: true, wantErr: ErrUnavailable, wantFetch: 1},
		{name: "no retry within the interval", fail: true, wantErr: ErrUnavailable, wantFetch: 1},
		{name: "back after the interval", advance: DefaultMinRefetchInterval, wantFetch: 2},
		{name: "stale keys serve while refresh fails", advance: DefaultRefreshInterval, fail: true, wantFetch: 3},
		{name: "still serving without hammering", advance: time.Second, fail: true, wantFetch: 3},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			f.server.setFail(s.fail)
			f.clock.Step(s.advance)
			_, err := f.verifier.Verify(context.Background(), tok())
			if !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
				t.Fatalf("Verify error = %v, want %v", err, s.wantErr)
			}
			f.verifier.Close() // a due refresh runs in the background
			if got := f.server.hits.Load(); got != s.wantFetch {
				t.Errorf("jwks fetches = %d, want %d", got, s.wantFetch)
			}
		})
	}
	if !strings.Contains(f.logs.String(), "jwks fetch failed") {
		t.Errorf("logs = %q, want the fetch failure", f.logs.String())
	}
}

func TestJWKSConcurrentFirstUseSharesOneFetch(t *testing.T) {
	const n = 50
	f := newJWTFixture(t)
	tok := sign(t, jwt.SigningMethodRS256, testKeys().rsaA, "rsa-a", f.claims(nil))
	release := f.server.hold()
	defer release()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = f.verifier.Verify(context.Background(), tok) })
	}
	for f.server.hits.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let the others queue behind the fetch
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("verify %d: %v", i, err)
		}
	}
	if got := f.server.hits.Load(); got != 1 {
		t.Errorf("jwks fetches = %d, want 1", got)
	}
}

func TestJWTConfig(t *testing.T) {
	teams := NewMemTeamStore(nil)
	base := JWTConfig{JWKSURL: "https://issuer.test/jwks", Issuer: testIssuer, Audience: testAudience, Teams: teams}
	tests := []struct {
		name   string
		edit   func(*JWTConfig)
		wantOK bool
	}{
		{name: "complete", edit: func(*JWTConfig) {}, wantOK: true},
		{name: "no issuer", edit: func(c *JWTConfig) { c.Issuer = "" }},
		{name: "no audience", edit: func(c *JWTConfig) { c.Audience = "" }},
		{name: "no teams", edit: func(c *JWTConfig) { c.Teams = nil }},
		{name: "plain http", edit: func(c *JWTConfig) { c.JWKSURL = "http://issuer.test/jwks" }},
		{name: "negative leeway", edit: func(c *JWTConfig) { c.Leeway = -time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.edit(&cfg)
			_, err := NewJWTVerifier(cfg)
			if got := err == nil; got != tt.wantOK {
				t.Errorf("NewJWTVerifier error = %v, want ok %v", err, tt.wantOK)
			}
		})
	}
}
