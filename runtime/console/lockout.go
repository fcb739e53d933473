package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The sign-in limits, and the threat model behind them.
//
// Every credential the console takes is out of reach of guessing: API keys
// carry 256 random bits, the admin token at least 32 random characters,
// and a JWT a signature; the same credentials work as Bearer headers on
// the API. So the limits are not what keeps a credential safe: they stop a
// client from hammering one credential (a leaked key prefix, a
// half-remembered token) and from trying many from one address, and they
// must never let one unauthenticated client shut anyone else out — behind
// the load balancer or a company's NAT, every user may share a few
// addresses. Hence:
//
//   - only failures count (a wrong credential), never a sign-in that
//     succeeded, nor one refused by the limits themselves;
//   - each counter is a fixed window that starts at its first failure and
//     ends signInWindow later, whatever happens in it: a refused attempt
//     never extends it, so a client that keeps trying is let in again on
//     time;
//   - failures count per credential (credentialBucket: an API key's public
//     prefix, the first characters of anything else; only a hash of it is
//     kept) and per client address (the real one, read from the load
//     balancer's PROXY header where it sends one);
//   - a credential with credentialFailures failures in its window is
//     refused unchecked, from every address;
//   - an address with addressFailures failures in its window may still
//     try any credential that has no failure of its own in the window, so
//     a colleague behind the same address signs in with a correct
//     credential while an attacker there can retry none of its guesses.
//
// What remains: an attacker who knows a key's public prefix can keep that
// key out of the console (never out of the API) by failing with it ten
// times a window.
const (
	// signInWindow is each counter's window, from its first failure.
	signInWindow = 15 * time.Minute
	// credentialFailures is how many failures one credential may have per
	// window: enough for a person who mistypes, far too few to guess.
	credentialFailures = 10
	// addressFailures is how many failures one address may have per
	// window before it may try only credentials without failures: a
	// handful of people mistyping behind one NAT stay well under it.
	addressFailures = 30
	// credentialBucketChars is how much of a credential names its bucket:
	// an API key's public prefix (credential.KeyPrefix and the 8
	// characters shown to users), and as much of anything else — never
	// enough of a secret to matter, and only its hash is kept.
	credentialBucketChars = 12
)

// errLocked is an attempt the limits refuse unchecked; lockout says why.
var errLocked = errors.New("console: too many failed sign-ins")

// lockout is a refused attempt: which counter refused it and how long
// until its window ends.
type lockout struct {
	byAddress bool
	retry     time.Duration
}

func (l *lockout) Error() string { return errLocked.Error() }
func (l *lockout) Unwrap() error { return errLocked }

// credentialBucket names the counter a credential's failures go to: a
// JWT's signature is what tells one token from another (its first
// characters are a header every token of an issuer shares), anything
// else its first credentialBucketChars characters. The bucket is a hash,
// so Redis never holds a credential or a part of one.
func credentialBucket(cred string) string {
	if parts := strings.Split(cred, "."); len(parts) == 3 {
		cred = parts[2]
	}
	if len(cred) > credentialBucketChars {
		cred = cred[:credentialBucketChars]
	}
	sum := sha256.Sum256([]byte("console-signin\x00" + cred))
	return hex.EncodeToString(sum[:16])
}

// signInKeys are the two counters of an attempt, their variable part in
// braces (a Cluster hash tag: each is touched on its own).
func (c *Console) signInKeys(cred, addr string) (credKey, addrKey string) {
	base := c.cfg.Prefix + "console:signin:"
	return base + "cred:{" + credentialBucket(cred) + "}", base + "addr:{" + addr + "}"
}

// checkSignIn refuses, with a *lockout, an attempt with cred from addr
// that the limits do not allow; it changes nothing.
func (c *Console) checkSignIn(ctx context.Context, cred, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	credKey, addrKey := c.signInKeys(cred, addr)
	// Not a transaction: the keys may live on different Cluster nodes,
	// and a count a moment old decides the same.
	pipe := c.cfg.Redis.Pipeline()
	credN, credTTL := pipe.Get(ctx, credKey), pipe.PTTL(ctx, credKey)
	addrN, addrTTL := pipe.Get(ctx, addrKey), pipe.PTTL(ctx, addrKey)
	cmds, _ := pipe.Exec(ctx)
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("read sign-in limits: %w", err)
		}
	}
	credFails, addrFails := count(credN), count(addrN)
	switch {
	case credFails >= credentialFailures:
		return &lockout{retry: credTTL.Val()}
	case addrFails >= addressFailures && credFails > 0:
		return &lockout{byAddress: true, retry: addrTTL.Val()}
	}
	return nil
}

// count reads a counter; a missing one is 0.
func count(cmd *redis.StringCmd) int64 {
	n, err := cmd.Int64()
	if err != nil {
		return 0
	}
	return n
}

// failOnce counts one failure: INCR, and the window's expiry only when
// the counter is new, in one step, so that nothing extends a window and a
// counter never outlives one.
var failOnce = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return n`)

// recordFailure counts a wrong credential against cred and addr.
func (c *Console) recordFailure(ctx context.Context, cred, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	credKey, addrKey := c.signInKeys(cred, addr)
	window := signInWindow.Milliseconds()
	for _, k := range []string{credKey, addrKey} {
		if err := failOnce.Run(ctx, c.cfg.Redis, []string{k}, window).Err(); err != nil {
			return fmt.Errorf("count a failed sign-in: %w", err)
		}
	}
	return nil
}
