package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestJWKSDownNewKidIsUnavailable: during a key rotation with the issuer
// down, a token signed with a kid the cache does not hold could not be
// checked: 503-class ErrUnavailable with the time until the next fetch,
// never "invalid credential". Fetch failures are logged and counted.
func TestJWKSDownNewKidIsUnavailable(t *testing.T) {
	k := testKeys()
	f := newJWTFixture(t)
	old := sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", f.claims(nil))
	if _, err := f.verifier.Verify(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	f.server.setFail(true)
	f.clock.Step(DefaultMinRefetchInterval)
	rotated := sign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-b", f.claims(nil))
	for _, step := range []string{"the fetch fails", "within the back-off"} {
		_, err := f.verifier.Verify(context.Background(), rotated)
		var ra interface{ RetryAfter() time.Duration }
		if !errors.Is(err, ErrUnavailable) || !errors.As(err, &ra) || ra.RetryAfter() <= 0 {
			t.Fatalf("%s: Verify = %v, want ErrUnavailable with a Retry-After", step, err)
		}
	}
	if _, err := f.verifier.Verify(context.Background(), old); err != nil {
		t.Errorf("a cached key stopped working while the issuer was down: %v", err)
	}
	if f.failures.Load() != 1 {
		t.Errorf("failures counted = %d, want 1", f.failures.Load())
	}
	// Back, with the new key: the rotated token passes after the back-off.
	f.server.setFail(false)
	f.server.setKeys(rsaJWK("rsa-a", "RS256", &k.rsaA.PublicKey), rsaJWK("rsa-b", "RS256", &k.rsaB.PublicKey))
	f.clock.Step(DefaultMinRefetchInterval)
	if _, err := f.verifier.Verify(context.Background(), rotated); err != nil {
		t.Errorf("after the issuer came back: %v", err)
	}
}

// TestSlowJWKSDoesNotDelayCachedKeys: when the periodic refresh is due and
// the issuer hangs, tokens whose key is cached are verified at once: the
// refresh runs in the background.
func TestSlowJWKSDoesNotDelayCachedKeys(t *testing.T) {
	k := testKeys()
	f := newJWTFixture(t)
	tok := func() string { return sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", f.claims(nil)) }
	if _, err := f.verifier.Verify(context.Background(), tok()); err != nil {
		t.Fatal(err)
	}
	release := f.server.hold()
	defer release()
	f.clock.Step(DefaultRefreshInterval)
	for range 3 {
		// Each returns while the issuer still holds the refresh: were the
		// refresh in the request path, this would wait for release.
		if _, err := f.verifier.Verify(context.Background(), tok()); err != nil {
			t.Fatal(err)
		}
	}
	release()
	f.verifier.Close()
	if got := f.server.hits.Load(); got != 2 {
		t.Errorf("jwks fetches = %d, want 2 (one refresh shared by every request)", got)
	}
}

// TestJWTWeakSpots: a redirecting JWKS URL is not followed, a token with
// critical header parameters is refused, and times outside the calendar
// (nbf = 1e20 overflows to the far past) are refused.
func TestJWTWeakSpots(t *testing.T) {
	k := testKeys()
	t.Run("redirect not followed", func(t *testing.T) {
		target := newJWKSServer(t, rsaJWK("rsa-a", "RS256", &k.rsaA.PublicKey))
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL(), http.StatusFound)
		}))
		defer redirect.Close()
		v, err := NewJWTVerifier(JWTConfig{JWKSURL: redirect.URL + "/jwks", Issuer: testIssuer, Audience: testAudience,
			Teams: NewMemTeamStore(map[string]int64{"ml": testTeamID}), HTTPClient: target.srv.Client(), Clock: newFakeClock()})
		if err != nil {
			t.Fatal(err)
		}
		f := newJWTFixture(t)
		_, err = v.Verify(context.Background(), sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", f.claims(nil)))
		if !errors.Is(err, ErrUnavailable) || target.hits.Load() != 0 {
			t.Errorf("Verify = %v with %d fetches at the redirect's target; want ErrUnavailable and none", err, target.hits.Load())
		}
	})
	f := newJWTFixture(t)
	t.Run("critical header", func(t *testing.T) {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, f.claims(nil))
		tok.Header["kid"], tok.Header["crit"] = "rsa-a", []string{"exp"}
		s, err := tok.SignedString(k.rsaA)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.verifier.Verify(context.Background(), s); !errors.Is(err, ErrInvalidCredential) {
			t.Errorf("Verify = %v, want ErrInvalidCredential", err)
		}
	})
	for _, claim := range []string{"nbf", "iat", "exp"} {
		t.Run(claim+" = 1e20", func(t *testing.T) {
			tok := sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", f.claims(func(c jwt.MapClaims) { c[claim] = 1e20 }))
			// exp overflows to the past and reads as expired: refused either way.
			if _, err := f.verifier.Verify(context.Background(), tok); !errors.Is(err, ErrInvalidCredential) && !errors.Is(err, ErrExpired) {
				t.Errorf("Verify = %v, want the token refused", err)
			}
		})
	}
}
