package credential

import (
	"fmt"
	"strings"
)

// NodeTokenPrefix starts every node token. It differs from KeyPrefix, so a
// node token is never taken for an API key (or the reverse), and a leaked
// one is recognisable.
const NodeTokenPrefix = "llpnode_"

// nodeTokenBodyLen is the number of base62 digits after the prefix: 43
// digits carry the 256 bits of GenerateKey.
const nodeTokenBodyLen = 43

// GenerateNodeToken returns a new random node token and the SHA-256 hash
// that alone is stored.
func GenerateNodeToken() (token string, hash []byte, err error) {
	k, err := GenerateKey()
	if err != nil {
		return "", nil, fmt.Errorf("generate node token: %w", err)
	}
	token = NodeTokenPrefix + k.Secret[len(KeyPrefix):]
	return token, HashKey(token), nil
}

// LooksLikeNodeToken reports whether s has a node token's shape (the
// prefix and 43 base62 digits, the strength of a generated one), so that
// garbage costs no query and a weaker client-minted token is refused.
func LooksLikeNodeToken(s string) bool {
	body, ok := strings.CutPrefix(s, NodeTokenPrefix)
	return ok && len(body) == nodeTokenBodyLen && LooksLikeKey(KeyPrefix+body)
}
