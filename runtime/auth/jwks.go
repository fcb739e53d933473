package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

const (
	// DefaultRefreshInterval is how often the JWKS is fetched again while
	// its keys keep matching: issuers announce new keys well ahead of use,
	// and 10 min picks them up without polling the issuer per request.
	DefaultRefreshInterval = 10 * time.Minute
	// DefaultMinRefetchInterval is the least time between two JWKS fetches
	// caused by unknown kids, and the wait after a failed fetch: a flood of
	// tokens with random kids costs the issuer at most one fetch per 30 s.
	DefaultMinRefetchInterval = 30 * time.Second
	// DefaultJWKSFetchTimeout bounds one JWKS fetch; requests waiting on it
	// fail with ErrUnavailable rather than hang.
	DefaultJWKSFetchTimeout = 5 * time.Second
	// maxJWKSBytes bounds a JWKS response: real ones hold a few keys in a
	// few KiB.
	maxJWKSBytes = 1 << 20
	// minRSABits is the smallest RSA modulus accepted (NIST's floor).
	minRSABits = 2048
	// es256CoordBytes is the length of a P-256 coordinate in a JWK.
	es256CoordBytes = 32
)

// The signing algorithms accepted. HMAC is never accepted: the platform
// shares no secret with the issuer.
const (
	algRS256 = "RS256"
	algES256 = "ES256"
)

// errUnknownKid is a token whose kid is not in the (refetched) JWKS.
var errUnknownKid = fmt.Errorf("%w: jwt signed with an unknown key id", ErrInvalidCredential)

// verifyKey is one usable key of the JWKS.
type verifyKey struct {
	alg string // the JWK's alg, "" when the JWK did not name one
	key crypto.PublicKey
}

// jwk is one JSON Web Key, restricted to the members used here.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS returns the usable signing keys of a JWKS document by kid:
// RSA keys of at least minRSABits and P-256 EC keys. Keys without a kid,
// for encryption, of other types or algorithms, or malformed are skipped;
// the first key of a kid wins.
func parseJWKS(data []byte) (map[string]verifyKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("decode jwks: %w", err)
	}
	keys := make(map[string]verifyKey, len(set.Keys))
	for _, k := range set.Keys {
		if _, dup := keys[k.Kid]; dup || k.Kid == "" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		var pub crypto.PublicKey
		var err error
		switch {
		case k.Kty == "RSA" && (k.Alg == "" || k.Alg == algRS256):
			pub, err = rsaKey(k)
		case k.Kty == "EC" && (k.Alg == "" || k.Alg == algES256):
			pub, err = ecKey(k)
		default:
			continue
		}
		if err != nil {
			continue
		}
		keys[k.Kid] = verifyKey{alg: k.Alg, key: pub}
	}
	if len(keys) == 0 {
		return nil, errors.New("jwks holds no usable signing key")
	}
	return keys, nil
}

// rsaKey decodes an RSA JWK.
func rsaKey(k jwk) (*rsa.PublicKey, error) {
	n, err := base64.RawURLEncoding.DecodeString(k.N)
	if err != nil {
		return nil, fmt.Errorf("rsa modulus: %w", err)
	}
	e, err := base64.RawURLEncoding.DecodeString(k.E)
	if err != nil {
		return nil, fmt.Errorf("rsa exponent: %w", err)
	}
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n)}
	exp := new(big.Int).SetBytes(e)
	if !exp.IsInt64() || exp.Int64() < 3 || exp.Int64() > 1<<31-1 || exp.Bit(0) == 0 {
		return nil, errors.New("rsa exponent out of range")
	}
	pub.E = int(exp.Int64())
	if pub.N.BitLen() < minRSABits {
		return nil, errors.New("rsa modulus too short")
	}
	return pub, nil
}

// ecKey decodes a P-256 JWK, checking that the point is on the curve.
func ecKey(k jwk) (*ecdsa.PublicKey, error) {
	if k.Crv != "P-256" {
		return nil, errors.New("unsupported curve")
	}
	x, errX := base64.RawURLEncoding.DecodeString(k.X)
	y, errY := base64.RawURLEncoding.DecodeString(k.Y)
	if errX != nil || errY != nil || len(x) != es256CoordBytes || len(y) != es256CoordBytes {
		return nil, errors.New("malformed ec coordinates")
	}
	point := append(append([]byte{4}, x...), y...)
	return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
}

// jwksCache holds the issuer's keys. They are fetched at first use, again
// once refresh has passed, and on an unknown kid at most once per
// minRefetch; after a failed fetch no other starts for minRefetch either.
// Concurrent callers share one fetch, and when a fetch fails the last good
// keys stay in use.
//
// It is not a TTL map, so golang-lru's expirable cache does not fit: the
// key set is replaced whole, never entry by entry, and must outlive its
// refresh time while the issuer is unreachable (an expiring entry would
// turn an issuer outage into refused tokens); the refetch limits and the
// background refresh are the part that needs code, and no cache holds them.
type jwksCache struct {
	url        string
	client     *http.Client
	clock      clock.PassiveClock
	refresh    time.Duration
	minRefetch time.Duration
	timeout    time.Duration
	logger     *slog.Logger
	// onFailure, when set, is told of every failed fetch (a metric).
	onFailure func()
	// bg tracks background refreshes, for close.
	bg sync.WaitGroup

	mu          sync.Mutex
	keys        map[string]verifyKey // nil until the first good fetch
	fetchedAt   time.Time            // of the last good fetch
	lastKid     time.Time            // start of the last fetch caused by an unknown kid
	lastFailure time.Time            // end of the last failed fetch
	inflight    *fetchCall           // the running fetch, if any
}

// fetchCall is one JWKS fetch that several callers may wait for.
type fetchCall struct {
	done chan struct{} // closed when err is set
	err  error
}

// key returns the key with kid, fetching the JWKS when the rules allow. A
// key in the cache is served at once: when the periodic refresh is due it
// runs in the background, so a slow issuer never delays a token whose key
// is known. Only a kid the cache does not hold waits for a fetch.
func (c *jwksCache) key(ctx context.Context, kid string) (verifyKey, error) {
	now := c.clock.Now()
	c.mu.Lock()
	k, found := c.keys[kid]
	due := c.keys == nil || now.Sub(c.fetchedAt) >= c.refresh
	backedOff := !c.lastFailure.IsZero() && now.Sub(c.lastFailure) < c.minRefetch
	if found {
		if due && c.inflight == nil && !backedOff {
			call := &fetchCall{done: make(chan struct{})}
			c.inflight = call
			c.bg.Add(1)
			go func() {
				defer c.bg.Done()
				c.run(context.Background(), call)
			}()
		}
		c.mu.Unlock()
		return k, nil
	}
	call := c.inflight
	if call == nil {
		allowed := !backedOff
		byKid := !due
		if byKid {
			allowed = allowed && (c.lastKid.IsZero() || now.Sub(c.lastKid) >= c.minRefetch)
		}
		if !allowed {
			loaded := c.keys != nil
			var failing error
			if backedOff {
				// The issuer could not be reached lately: this kid may be a
				// new key it announced meanwhile. Unchecked is not invalid.
				failing = &retryError{err: errors.New("the last jwks fetch failed"), after: c.minRefetch - now.Sub(c.lastFailure)}
			}
			c.mu.Unlock()
			return answer(k, found, loaded, failing)
		}
		if byKid {
			c.lastKid = now
		}
		call = &fetchCall{done: make(chan struct{})}
		c.inflight = call
		c.mu.Unlock()
		c.run(ctx, call)
	} else {
		c.mu.Unlock()
		select {
		case <-call.done:
		case <-ctx.Done():
			return verifyKey{}, fmt.Errorf("%w: wait for jwks: %w", ErrUnavailable, ctx.Err())
		}
	}
	c.mu.Lock()
	k, found = c.keys[kid]
	loaded := c.keys != nil
	c.mu.Unlock()
	var fetchErr error
	if call.err != nil {
		fetchErr = &retryError{err: call.err, after: c.minRefetch}
	}
	return answer(k, found, loaded, fetchErr)
}

// answer is key's result once no (further) fetch will be made. A kid not
// found after a fetch that failed could not be checked: that is the
// issuer's outage (503 with Retry-After), not a bad token.
func answer(k verifyKey, found, loaded bool, fetchErr error) (verifyKey, error) {
	switch {
	case found:
		return k, nil
	case fetchErr != nil:
		return verifyKey{}, fmt.Errorf("%w: %w", ErrUnavailable, fetchErr)
	case !loaded:
		return verifyKey{}, fmt.Errorf("%w: jwks not loaded yet", ErrUnavailable)
	default:
		return verifyKey{}, errUnknownKid
	}
}

// retryError is a JWKS failure with the time until the next fetch may run.
type retryError struct {
	err   error
	after time.Duration
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// RetryAfter is how long until the JWKS is fetched again.
func (e *retryError) RetryAfter() time.Duration { return e.after }

// close waits for a background refresh to end (bounded by the fetch
// timeout).
func (c *jwksCache) close() { c.bg.Wait() }

// run performs call's fetch and installs its keys on success.
func (c *jwksCache) run(ctx context.Context, call *fetchCall) {
	keys, err := c.fetch(ctx)
	c.mu.Lock()
	if err == nil {
		c.keys = keys
		c.fetchedAt = c.clock.Now()
	} else {
		c.lastFailure = c.clock.Now()
	}
	c.inflight = nil
	c.mu.Unlock()
	if err != nil {
		c.logger.Warn("jwks fetch failed; keeping the last good keys", "url", c.url, "err", err,
			"next_try_in", c.minRefetch.String())
		if c.onFailure != nil {
			c.onFailure()
		}
	}
	call.err = err
	close(call.done)
}

// fetch downloads and parses the JWKS. It is detached from the caller's
// cancellation: other callers may be waiting for it.
func (c *jwksCache) fetch(ctx context.Context) (map[string]verifyKey, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch jwks: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("fetch jwks: larger than %d bytes", maxJWKSBytes)
	}
	return parseJWKS(body)
}
