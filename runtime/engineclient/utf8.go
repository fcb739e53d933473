package engineclient

import "unicode/utf8"

// replacementChar is what an engine's bytes that are not UTF-8 become.
const replacementChar = "\uFFFD"

// AppendValidUTF8 appends src to dst with each run of bytes that is not
// valid UTF-8 replaced by one U+FFFD, as bytes.ToValidUTF8 does. An
// engine's event goes to clients in SSE and over the node socket in
// WebSocket text frames, both UTF-8 by their specs: a strict client's
// JSON parser, or a strict proxy, refuses the event as the engine wrote
// it. In an engine event such bytes can only stand inside a JSON string
// (elsewhere the event is not JSON), so the event stays the JSON it was,
// its text showing U+FFFD as a browser would.
func AppendValidUTF8(dst, src []byte) []byte {
	if utf8.Valid(src) {
		return append(dst, src...)
	}
	invalid := false
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i, invalid = i+1, false
			continue
		}
		_, n := utf8.DecodeRune(src[i:])
		if n == 1 {
			if !invalid {
				dst = append(dst, replacementChar...)
			}
			i, invalid = i+1, true
			continue
		}
		dst = append(dst, src[i:i+n]...)
		i, invalid = i+n, false
	}
	return dst
}
