package nodeproto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// header opens every encoded frame: the version, then the type's string.
var header = []byte(`{"v":` + strconv.Itoa(Version) + `,"type":"`)

// Encode returns the frame's JSON after validating it. See AppendFrame.
func Encode(f Frame) ([]byte, error) { return AppendFrame(nil, f) }

// AppendFrame validates f and appends its JSON to dst, "v" and "type"
// first, without HTML escaping; raw payloads (a chunk's delta, an assign's
// body) are copied verbatim. A frame longer than its receiver's read limit
// is refused with ErrTooLarge, so the peer never has to close over it. On
// error dst is returned unchanged.
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	if f == nil {
		return dst, fmt.Errorf("encode: %w: nil frame", ErrInvalid)
	}
	t := f.Type()
	if err := f.Validate(); err != nil {
		return dst, fmt.Errorf("encode %s: %w", t, err)
	}
	start := len(dst)
	var err error
	switch f := f.(type) {
	case *Chunk:
		dst = appendChunk(dst, f)
	case *Assign:
		dst = appendAssign(dst, f)
	default:
		dst, err = appendGeneric(dst, f)
	}
	if err != nil {
		return dst[:start], fmt.Errorf("encode %s: %w", t, err)
	}
	if n := len(dst) - start; n > t.readLimit() {
		return dst[:start], fmt.Errorf("encode %s: %w: %d bytes, limit %d", t, ErrTooLarge, n, t.readLimit())
	}
	return dst, nil
}

// appendGeneric encodes a frame with encoding/json and puts the header in
// front of its members.
func appendGeneric(dst []byte, f Frame) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		return dst, err
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n")) // a struct: "{…}"
	dst = appendHeader(dst, f.Type())
	if len(body) > len("{}") {
		dst = append(dst, ',')
		return append(dst, body[1:]...), nil
	}
	return append(dst, '}'), nil
}

// appendHeader appends `{"v":1,"type":"<t>"`.
func appendHeader(dst []byte, t Type) []byte {
	dst = append(dst, header...)
	dst = append(dst, t...)
	return append(dst, '"')
}

// Decode parses one frame and validates it. The result is one of this
// package's frame pointers (*Chunk, *Assign, …). Errors wrap ErrTooLarge
// (over MaxFrameBytes, or over the read limit of the frame's receiver),
// ErrMalformed, ErrVersion, ErrUnknownType (the caller ignores the frame)
// or ErrInvalid. The frame may share memory with b (a chunk's Delta does),
// so b must not be modified while the frame is in use.
func Decode(b []byte) (Frame, error) {
	if len(b) > MaxFrameBytes {
		return nil, fmt.Errorf("decode: %w: %d bytes, limit %d", ErrTooLarge, len(b), MaxFrameBytes)
	}
	if len(b) <= ServerReadLimit {
		if c, ok := decodeChunkFast(b); ok {
			return c, nil
		}
	}
	return decodeSlow(b)
}

// decodeSlow decodes any frame with encoding/json: one pass to find the
// version and type unless the header is in canonical form, then one into
// the frame.
func decodeSlow(b []byte) (Frame, error) {
	t, err := readHeader(b)
	if err != nil {
		return nil, err
	}
	f := newFrame(t)
	if f == nil {
		if !json.Valid(b) {
			return nil, fmt.Errorf("decode: %w: invalid JSON", ErrMalformed)
		}
		return nil, fmt.Errorf("decode: %w: %q", ErrUnknownType, t)
	}
	if limit := t.readLimit(); len(b) > limit {
		return nil, fmt.Errorf("decode %s: %w: %d bytes, limit %d", t, ErrTooLarge, len(b), limit)
	}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("decode %s: %w: %w", t, ErrMalformed, err)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("decode %s: %w", t, err)
	}
	return f, nil
}

// readHeader returns a frame's type after checking its version. A header in
// the encoder's canonical form is read without a JSON pass; the rest of the
// input is then validated by the pass into the frame.
func readHeader(b []byte) (Type, error) {
	if rest, ok := bytes.CutPrefix(b, header); ok {
		i := 0
		for i < len(rest) && (rest[i] >= 'a' && rest[i] <= 'z' || rest[i] == '_') {
			i++
		}
		if i > 0 && i+1 < len(rest) && rest[i] == '"' && (rest[i+1] == ',' || rest[i+1] == '}') {
			if t, ok := knownType(rest[:i]); ok {
				return t, nil
			}
			return Type(rest[:i]), nil
		}
	}
	var env struct {
		V    *int64  `json:"v"`
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return "", fmt.Errorf("decode: %w: %w", ErrMalformed, err)
	}
	switch {
	case env.V == nil:
		return "", fmt.Errorf("decode: %w: no version", ErrMalformed)
	case *env.V != Version:
		return "", fmt.Errorf("decode: %w", &VersionError{Got: *env.V})
	case env.Type == nil || *env.Type == "":
		return "", fmt.Errorf("decode: %w: no type", ErrMalformed)
	}
	return Type(*env.Type), nil
}

// knownType returns the Type constant named by name without allocating.
func knownType(name []byte) (Type, bool) {
	for _, t := range allTypes {
		if string(name) == string(t) {
			return t, true
		}
	}
	return "", false
}

// allTypes backs knownType; Types returns a copy.
var allTypes = Types()
