// Package auth turns a request's bearer credential into a verified
// principal: who is calling, for which team, with which role and limits.
//
// Authenticator.Authenticate takes the Authorization header. A credential
// shaped like an API key (credential.LooksLikeKey: "llp_" and 43 base62 digits, 256
// random bits, stored only as its SHA-256) is checked through a KeyCache;
// anything else is verified as a JWT by a JWTVerifier; the local mode's
// bootstrap StaticAdminToken yields an admin with no team.
//
// The KeyCache is the gateway's cheapest admission step. It keeps found
// keys for DefaultKeyCacheTTL and unknown hashes for DefaultNegativeTTL,
// each bounded in number with the least recently used evicted first, makes one KeyStore lookup for any number of
// concurrent misses on a key, and checks expiry and revocation on every use
// against its injected clock. Revoking a key publishes on the Redis channel
// RevocationChannel(prefix), "{prefix}auth:revoked"; every replica's
// KeyCache.Run evicts the key within a round trip and flushes the whole
// cache after each (re)subscription, since messages may have been missed.
// A lost message is bounded by the TTL.
//
// JWTs must be RS256 or ES256, name a kid found in the issuer's JWKS, and
// carry the configured iss and aud, an exp, and valid nbf and iat (with a
// small leeway). HMAC and "none" are refused: the platform shares no secret
// with the issuer. The JWKS is fetched at first use, every RefreshInterval,
// and on an unknown kid at most once per MinRefetchInterval. The team and
// role come from configurable claims; the team name is resolved through a
// TeamStore; all JWT callers share the limits of JWTConfig.Limits.
//
// Errors are the sentinels ErrMissingCredential, ErrInvalidCredential,
// ErrExpired, ErrRevoked (401 at the gateway) and ErrUnavailable (503).
// Neither errors nor logs ever contain a key or a token.
package auth
