package nodeproto

import (
	"encoding/json"
	"fmt"

	"github.com/llmplat/llmplat/runtime/jsonscan"
)

// MaxIDLen bounds node and request ids: they become Redis keys and channel
// names, and 128 bytes is far above the gateway's req_ plus 32 hex digits.
const MaxIDLen = 128

// ValidID reports whether id can name a node or a request: 1 to MaxIDLen
// bytes of ASCII letters, digits, '.', '_' and '-'. Such an id never needs
// escaping in JSON, a Redis key or a log line.
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return false
		}
	}
	return true
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// checkID validates an id field of frame type t.
func checkID(t Type, field, id string) error {
	if id == "" {
		return invalid(t, field, "is required")
	}
	if !ValidID(id) {
		return invalid(t, field, fmt.Sprintf("must be 1–%d bytes of [A-Za-z0-9._-]", MaxIDLen))
	}
	return nil
}

// checkObject validates a raw JSON field that must hold one JSON object.
func checkObject(t Type, field string, raw json.RawMessage) error {
	i := 0
	for i < len(raw) && isSpace(raw[i]) {
		i++
	}
	if i == len(raw) {
		return invalid(t, field, "is required")
	}
	if raw[i] != '{' || !validJSON(raw) {
		return invalid(t, field, "must be a JSON object")
	}
	return nil
}

// validJSON is json.Valid, answered by jsonscan's faster scan where it
// can (a chunk's delta is checked by the agent as it encodes and by the
// orchestrator as it decodes): only what jsonscan refuses, malformed or
// nested past jsonscan.MaxDepth, is checked again by encoding/json, which
// decides.
func validJSON(b []byte) bool {
	if _, ok := jsonscan.Value(b); ok {
		return true
	}
	return json.Valid(b)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// checkFraction validates an optional fraction in [0, 1]; NaN fails.
func checkFraction(t Type, field string, p *float64) error {
	if p != nil && !(*p >= 0 && *p <= 1) {
		return invalid(t, field, "must be in [0, 1]")
	}
	return nil
}

// nilFrame is the error of a nil frame pointer.
func nilFrame(t Type) error { return invalid(t, "", "frame is nil") }
