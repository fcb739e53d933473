package auth

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/credential"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// authFixture is an Authenticator with all three paths on.
type authFixture struct {
	auth   *Authenticator
	store  *MemKeyStore
	jwt    *jwtFixture
	clock  *testingclock.FakeClock
	admin  string
	valid  credential.Key
	logs   *testenv.Buffer
	expKey credential.Key
	revKey credential.Key
}

func newAuthFixture(t *testing.T) *authFixture {
	t.Helper()
	j := newJWTFixture(t)
	store := NewMemKeyStore()
	logs := &testenv.Buffer{}
	cache := newTestCache(t, KeyCacheConfig{Store: store, Clock: j.clock,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	adminTok, err := GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := NewStaticAdminToken(adminTok)
	if err != nil {
		t.Fatal(err)
	}
	now := j.clock.Now()
	limits := Limits{ModelAllowlist: []string{"llama-8b"}, RPM: 10, TokensPerDay: 5000, MaxStreams: 2, MaxTokens: 1024}
	return &authFixture{
		auth:   &Authenticator{Keys: cache, JWT: j.verifier, Admin: admin},
		store:  store,
		jwt:    j,
		clock:  j.clock,
		admin:  adminTok,
		logs:   logs,
		valid:  newTestKey(t, store, KeyRecord{ID: 42, TeamID: 7, TeamName: "ml", Limits: limits, ExpiresAt: now.Add(time.Hour)}),
		expKey: newTestKey(t, store, KeyRecord{ID: 43, TeamID: 7, ExpiresAt: now.Add(-time.Hour)}),
		revKey: newTestKey(t, store, KeyRecord{ID: 44, TeamID: 7, RevokedAt: now.Add(-time.Hour)}),
	}
}

func TestAuthenticateKey(t *testing.T) {
	f := newAuthFixture(t)
	got, err := f.auth.Authenticate(context.Background(), "Bearer "+f.valid.Secret)
	if err != nil {
		t.Fatal(err)
	}
	want := Principal{
		Kind: KindAPIKey, TeamID: 7, TeamName: "ml", KeyID: 42, Subject: f.valid.Display, Role: RoleUser,
		Limits:    Limits{ModelAllowlist: []string{"llama-8b"}, RPM: 10, TokensPerDay: 5000, MaxStreams: 2, MaxTokens: 1024},
		ExpiresAt: f.clock.Now().Add(time.Hour),
	}
	if !principalsEqual(got, want) {
		t.Errorf("Authenticate = %+v, want %+v", got, want)
	}
	if got.QuotaID() != "key:42" {
		t.Errorf("QuotaID = %q, want key:42", got.QuotaID())
	}
}

// changeLast returns s with its last character replaced by a different
// one. A fixed replacement would equal the random original now and then.
func changeLast(s string) string {
	last := "x"
	if strings.HasSuffix(s, last) {
		last = "y"
	}
	return s[:len(s)-1] + last
}

func principalsEqual(a, b Principal) bool {
	al, bl := a.Limits, b.Limits
	return a.Kind == b.Kind && a.TeamID == b.TeamID && a.TeamName == b.TeamName && a.KeyID == b.KeyID &&
		a.Subject == b.Subject && a.Role == b.Role && a.ExpiresAt.Equal(b.ExpiresAt) &&
		strings.Join(al.ModelAllowlist, ",") == strings.Join(bl.ModelAllowlist, ",") &&
		al.RPM == bl.RPM && al.TokensPerDay == bl.TokensPerDay && al.MaxStreams == bl.MaxStreams && al.MaxTokens == bl.MaxTokens
}

func TestAuthenticate(t *testing.T) {
	f := newAuthFixture(t)
	k := testKeys()
	unknown, err := credential.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	goodJWT := sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", f.jwt.claims(nil))
	expiredJWT := sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", f.jwt.claims(func(c jwt.MapClaims) {
		c["exp"] = f.clock.Now().Add(-time.Hour).Unix()
		c["iat"] = f.clock.Now().Add(-2 * time.Hour).Unix()
		c["nbf"] = f.clock.Now().Add(-2 * time.Hour).Unix()
	}))
	tests := []struct {
		name     string
		header   string
		wantErr  error
		wantKind Kind
		wantRole Role
	}{
		{name: "no header", header: "", wantErr: ErrMissingCredential},
		{name: "empty bearer", header: "Bearer ", wantErr: ErrMissingCredential},
		{name: "basic scheme", header: "Basic " + f.valid.Secret, wantErr: ErrInvalidCredential},
		{name: "api key", header: "Bearer " + f.valid.Secret, wantKind: KindAPIKey},
		{name: "lower-case scheme", header: "bearer " + f.valid.Secret, wantKind: KindAPIKey},
		{name: "unknown api key", header: "Bearer " + unknown.Secret, wantErr: ErrInvalidCredential},
		{name: "malformed api key", header: "Bearer " + f.valid.Secret[:20], wantErr: ErrInvalidCredential},
		{name: "expired api key", header: "Bearer " + f.expKey.Secret, wantErr: ErrExpired},
		{name: "revoked api key", header: "Bearer " + f.revKey.Secret, wantErr: ErrRevoked},
		{name: "jwt", header: "Bearer " + goodJWT, wantKind: KindJWT},
		{name: "expired jwt", header: "Bearer " + expiredJWT, wantErr: ErrExpired},
		{name: "admin token", header: "Bearer " + f.admin, wantKind: KindAdminToken, wantRole: RoleAdmin},
		{name: "wrong admin token", header: "Bearer " + changeLast(f.admin), wantErr: ErrInvalidCredential},
		{name: "garbage", header: "Bearer hello-world-what-is-this", wantErr: ErrInvalidCredential},
		{name: "too long", header: "Bearer " + strings.Repeat("a.", maxCredentialBytes), wantErr: ErrInvalidCredential},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.auth.Authenticate(context.Background(), tt.header)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Authenticate error = %v, want %v", err, tt.wantErr)
				}
				_, cred, _ := strings.Cut(tt.header, " ")
				assertNoEcho(t, err.Error(), cred)
				return
			}
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if got.Kind != tt.wantKind || got.Role != tt.wantRole {
				t.Errorf("Authenticate = kind %v role %v, want kind %v role %v", got.Kind, got.Role, tt.wantKind, tt.wantRole)
			}
		})
	}
	for _, cred := range []string{f.valid.Secret, unknown.Secret, goodJWT, expiredJWT, f.admin} {
		assertNoEcho(t, f.logs.String()+f.jwt.logs.String(), cred)
	}
}

func TestAuthenticateMalformedKeyCostsNoLookup(t *testing.T) {
	f := newAuthFixture(t)
	_, err := f.auth.Authenticate(context.Background(), "Bearer llp_short")
	if !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("Authenticate error = %v, want ErrInvalidCredential", err)
	}
	if got := f.store.Lookups(); got != 0 {
		t.Errorf("store lookups = %d, want 0", got)
	}
}

func TestAuthenticateDisabledPaths(t *testing.T) {
	k, err := credential.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		header string
	}{
		{name: "api key without a key cache", header: "Bearer " + k.Secret},
		{name: "jwt without a verifier", header: "Bearer aaaa.bbbb.cccc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := (&Authenticator{}).Authenticate(context.Background(), tt.header)
			if !errors.Is(err, ErrInvalidCredential) {
				t.Errorf("Authenticate error = %v, want ErrInvalidCredential", err)
			}
		})
	}
}

func TestAuthenticateStoreDown(t *testing.T) {
	f := newAuthFixture(t)
	f.store.SetError(errors.New("connection refused"))
	_, err := f.auth.Authenticate(context.Background(), "Bearer "+f.valid.Secret)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("Authenticate error = %v, want ErrUnavailable only", err)
	}
	assertNoEcho(t, err.Error(), f.valid.Secret)
}
