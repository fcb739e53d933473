package credential

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"math/big"
	"strings"
)

// KeyPrefix starts every API key so that scanners and people recognise a
// leaked one.
const KeyPrefix = "llp_"

// keySecretBytes is the key's randomness: 32 bytes, 256 bits.
const keySecretBytes = 32

// keyIDLen is how many characters after KeyPrefix are shown to users to
// name a key without revealing it.
const keyIDLen = 8

// base62 is the alphabet of key secrets: safe in headers, URLs and shells.
const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Key is a newly generated API key. Secret is shown once and never stored;
// Hash is what the database keeps.
type Key struct {
	Secret string
	// Display is the part of the key that may be shown later ("llp_AbC123xy").
	Display string
	Hash    []byte
}

// GenerateKey returns a new random API key.
func GenerateKey() (Key, error) {
	var raw [keySecretBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Key{}, err
	}
	body := new(big.Int).SetBytes(raw[:]).Text(62)
	// Left-pad so every key has the same length (43 base62 digits hold 256 bits).
	const width = 43
	if len(body) < width {
		body = strings.Repeat("0", width-len(body)) + body
	}
	body = toAlphabet(body)
	secret := KeyPrefix + body
	return Key{Secret: secret, Display: secret[:len(KeyPrefix)+keyIDLen], Hash: HashKey(secret)}, nil
}

// KeyFromSecret returns the Key of a secret minted by a client (for
// example Terraform's ephemeral key material), so that the secret never
// has to come back from the server. It must have a generated key's shape.
func KeyFromSecret(secret string) (Key, error) {
	if !LooksLikeKey(secret) {
		return Key{}, ErrMalformedKey
	}
	return Key{Secret: secret, Display: secret[:len(KeyPrefix)+keyIDLen], Hash: HashKey(secret)}, nil
}

// toAlphabet maps big.Int's base-62 digits (0-9a-zA-Z) onto base62.
func toAlphabet(s string) string {
	const bigDigits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := []byte(s)
	for i, c := range b {
		b[i] = base62[strings.IndexByte(bigDigits, c)]
	}
	return string(b)
}

// ErrMalformedKey is returned for a credential that cannot be an API key.
var ErrMalformedKey = errors.New("credential: malformed api key")

// HashKey is the stored form of a key: SHA-256 of the whole secret. A slow
// password hash is not needed: keys carry 256 bits of randomness, so no
// guessing attack exists, and the lookup stays on the hot path's budget.
func HashKey(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// LooksLikeKey reports whether s has the shape of an API key, so that JWTs
// and keys can be told apart before any lookup.
func LooksLikeKey(s string) bool {
	if !strings.HasPrefix(s, KeyPrefix) || len(s) != len(KeyPrefix)+43 {
		return false
	}
	for _, c := range s[len(KeyPrefix):] {
		if !strings.ContainsRune(base62, c) {
			return false
		}
	}
	return true
}

// EqualHash compares two key hashes in constant time.
func EqualHash(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }
