package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"k8s.io/utils/clock"
)

const (
	// DefaultJWTLeeway is the clock skew allowed between the issuer and the
	// gateway on exp, nbf and iat: enough for NTP-synced hosts, small enough
	// that an expired token dies within half a minute.
	DefaultJWTLeeway = 30 * time.Second
	// DefaultTeamClaim and DefaultRoleClaim are the claims read for the
	// caller's team name and role.
	DefaultTeamClaim = "team"
	DefaultRoleClaim = "role"
	// AdminRoleValue is the role claim value (or array element) that makes
	// a JWT caller an admin.
	AdminRoleValue = "admin"
	// maxSubjectLen bounds the sub claim.
	maxSubjectLen = 256
	// maxNumericDate is 9999-12-31T23:59:59Z, the last second time.Time
	// and every issuer agree on.
	maxNumericDate = 253402300799
)

// JWTConfig configures a JWTVerifier.
type JWTConfig struct {
	// JWKSURL is the issuer's JWKS endpoint: https, or http to a loopback
	// host for local issuers. Required.
	JWKSURL string
	// Issuer is the required iss claim. Required.
	Issuer string
	// Audience is the required aud claim (one of its values). Required.
	Audience string
	// TeamClaim and RoleClaim name the claims holding the team name and the
	// role (DefaultTeamClaim, DefaultRoleClaim). The role claim may be a
	// string or an array of strings; AdminRoleValue in it gives RoleAdmin.
	// A RoleUser token must name a team; an admin token may omit it.
	TeamClaim, RoleClaim string
	// Limits are every JWT caller's quotas: tokens carry no limits of their
	// own, and unlike API keys JWT callers have no row to hold them. The
	// zero value means unlimited, so set it for production issuers.
	Limits Limits
	// Teams resolves the team claim to a team id. Required.
	Teams TeamStore
	// Leeway is the allowed clock skew (DefaultJWTLeeway).
	Leeway time.Duration
	// RefreshInterval, MinRefetchInterval and FetchTimeout govern the JWKS
	// cache (DefaultRefreshInterval, DefaultMinRefetchInterval,
	// DefaultJWKSFetchTimeout).
	RefreshInterval, MinRefetchInterval, FetchTimeout time.Duration
	// HTTPClient fetches the JWKS; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Clock is the clock for token times, the JWKS schedule and the team
	// cache; nil means the real clock.
	Clock clock.PassiveClock
	// Logger receives JWKS fetch failures; never a token. Nil discards.
	Logger *slog.Logger
	// OnJWKSFailure, when set, is called after every failed JWKS fetch
	// (frontdoor counts them in a metric).
	OnJWKSFailure func()
}

// withDefaults validates c and fills its defaults.
func (c JWTConfig) withDefaults() (JWTConfig, error) {
	if err := checkJWKSURL(c.JWKSURL); err != nil {
		return c, err
	}
	if c.Issuer == "" || c.Audience == "" || c.Teams == nil {
		return c, errors.New("jwt verifier: issuer, audience and team store are required")
	}
	if c.Leeway < 0 || c.RefreshInterval < 0 || c.MinRefetchInterval < 0 || c.FetchTimeout < 0 {
		return c, errors.New("jwt verifier: durations must not be negative")
	}
	setDefault(&c.TeamClaim, DefaultTeamClaim)
	setDefault(&c.RoleClaim, DefaultRoleClaim)
	setDefault(&c.Leeway, DefaultJWTLeeway)
	setDefault(&c.RefreshInterval, DefaultRefreshInterval)
	setDefault(&c.MinRefetchInterval, DefaultMinRefetchInterval)
	setDefault(&c.FetchTimeout, DefaultJWKSFetchTimeout)
	c.Limits.ModelAllowlist = slices.Clone(c.Limits.ModelAllowlist)
	// Never follow a redirect: the configured URL is the one checked
	// (https, or loopback http), and a redirect could lead anywhere.
	client := http.Client{}
	if c.HTTPClient != nil {
		client = *c.HTTPClient
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error {
		return errors.New("jwks url redirected; configure the final URL")
	}
	c.HTTPClient = &client
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, nil
}

// checkJWKSURL accepts https URLs, and http ones to a loopback host.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("jwt verifier: jwks url must be an absolute URL")
	}
	if u.Scheme == "https" {
		return nil
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	if u.Scheme == "http" && (host == "localhost" || (ip != nil && ip.IsLoopback())) {
		return nil
	}
	return errors.New("jwt verifier: jwks url must use https (http only to a loopback host)")
}

// JWTVerifier verifies RS256 and ES256 JWTs against the issuer's cached
// JWKS and maps their claims to a Principal.
type JWTVerifier struct {
	cfg    JWTConfig
	parser *jwt.Parser
	jwks   *jwksCache
	teams  *teamCache
}

// NewJWTVerifier returns a verifier; the JWKS is fetched at first use.
func NewJWTVerifier(cfg JWTConfig) (*JWTVerifier, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	teams, err := newTeamCache(cfg.Teams, cfg.Clock)
	if err != nil {
		return nil, err
	}
	return &JWTVerifier{
		cfg: cfg,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{algRS256, algES256}),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(cfg.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(cfg.Leeway),
			jwt.WithTimeFunc(cfg.Clock.Now),
		),
		jwks: &jwksCache{
			url: cfg.JWKSURL, client: cfg.HTTPClient, clock: cfg.Clock, logger: cfg.Logger, onFailure: cfg.OnJWKSFailure,
			refresh: cfg.RefreshInterval, minRefetch: cfg.MinRefetchInterval, timeout: cfg.FetchTimeout,
		},
		teams: teams,
	}, nil
}

// Verify checks token and returns its principal. It fails with
// ErrInvalidCredential, ErrExpired, or ErrUnavailable when the JWKS or the
// team store cannot be reached; no error contains the token.
func (v *JWTVerifier) Verify(ctx context.Context, token string) (Principal, error) {
	if len(token) > maxCredentialBytes {
		return Principal{}, fmt.Errorf("%w: jwt too long", ErrInvalidCredential)
	}
	var keyErr error // set by keyFunc; already classified
	keyFunc := func(t *jwt.Token) (any, error) {
		k, err := v.signingKey(ctx, t)
		keyErr = err
		return k, err
	}
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, claims, keyFunc); err != nil {
		if keyErr != nil {
			return Principal{}, keyErr
		}
		return Principal{}, classifyJWTError(err)
	}
	return v.principal(ctx, claims)
}

// Close waits for a background JWKS refresh to end; the verifier stays
// usable.
func (v *JWTVerifier) Close() { v.jwks.close() }

// signingKey is the parser's key function: the JWKS key named by the
// token's kid, if it fits the token's alg. A token with critical header
// parameters is refused: this verifier understands none (RFC 7515
// §4.1.11).
func (v *JWTVerifier) signingKey(ctx context.Context, t *jwt.Token) (any, error) {
	if _, crit := t.Header["crit"]; crit {
		return nil, fmt.Errorf("%w: jwt has critical header parameters this verifier does not understand", ErrInvalidCredential)
	}
	kid, _ := t.Header["kid"].(string)
	if kid == "" {
		return nil, fmt.Errorf("%w: jwt has no key id", ErrInvalidCredential)
	}
	k, err := v.jwks.key(ctx, kid)
	if err != nil {
		return nil, err
	}
	alg := t.Method.Alg()
	mismatch := fmt.Errorf("%w: jwt alg does not match its key", ErrInvalidCredential)
	if k.alg != "" && k.alg != alg {
		return nil, mismatch
	}
	switch key := k.key.(type) {
	case *rsa.PublicKey:
		if alg == algRS256 {
			return key, nil
		}
	case *ecdsa.PublicKey:
		if alg == algES256 {
			return key, nil
		}
	}
	return nil, mismatch
}

// jwtClaimErrors are the parser's failures other than expiry, in the order
// they are reported; each is a fixed text that never quotes the token.
var jwtClaimErrors = []error{
	jwt.ErrTokenMalformed, jwt.ErrTokenUnverifiable, jwt.ErrTokenSignatureInvalid,
	jwt.ErrTokenNotValidYet, jwt.ErrTokenUsedBeforeIssued, jwt.ErrTokenInvalidIssuer,
	jwt.ErrTokenInvalidAudience, jwt.ErrTokenRequiredClaimMissing, jwt.ErrInvalidType,
}

// classifyJWTError maps a parser error to ErrExpired or
// ErrInvalidCredential. A token is reported expired only when nothing else
// is wrong with it, so that the message never vouches for a bad token.
func classifyJWTError(err error) error {
	for _, reason := range jwtClaimErrors {
		if errors.Is(err, reason) {
			return fmt.Errorf("%w: jwt: %w", ErrInvalidCredential, reason)
		}
	}
	if errors.Is(err, jwt.ErrTokenExpired) {
		return fmt.Errorf("%w: jwt: %w", ErrExpired, jwt.ErrTokenExpired)
	}
	return fmt.Errorf("%w: jwt rejected", ErrInvalidCredential)
}

// principal maps verified claims to a Principal.
func (v *JWTVerifier) principal(ctx context.Context, claims jwt.MapClaims) (Principal, error) {
	sub, _ := claims["sub"].(string)
	if sub == "" || len(sub) > maxSubjectLen {
		return Principal{}, fmt.Errorf("%w: jwt sub missing or too long", ErrInvalidCredential)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return Principal{}, fmt.Errorf("%w: jwt exp missing", ErrInvalidCredential)
	}
	// A time past year 9999 overflows time.Time into the far past, where
	// nbf = 1e20 would pass: refuse any time outside the calendar.
	for _, name := range []string{"exp", "nbf", "iat"} {
		if v, ok := claims[name]; ok {
			if f, num := v.(float64); !num || !(f >= 0 && f <= maxNumericDate) {
				return Principal{}, fmt.Errorf("%w: jwt %s out of range", ErrInvalidCredential, name)
			}
		}
	}
	p := Principal{
		Kind: KindJWT, Subject: sub, Role: roleOf(claims[v.cfg.RoleClaim]),
		Limits: v.cfg.Limits, ExpiresAt: exp.Time,
	}
	team, ok := claims[v.cfg.TeamClaim].(string)
	if !ok || team == "" {
		if p.Role == RoleAdmin {
			return p, nil
		}
		return Principal{}, fmt.Errorf("%w: jwt names no team", ErrInvalidCredential)
	}
	p.TeamName = team
	if p.TeamID, err = v.teams.id(ctx, team); err != nil {
		return Principal{}, err
	}
	return p, nil
}

// roleOf reads a role claim: a string or an array of strings.
func roleOf(claim any) Role {
	switch c := claim.(type) {
	case string:
		if c == AdminRoleValue {
			return RoleAdmin
		}
	case []any:
		for _, r := range c {
			if r == AdminRoleValue {
				return RoleAdmin
			}
		}
	}
	return RoleUser
}
