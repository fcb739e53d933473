package jsonscan

import (
	"bytes"
	"math"
	"unicode/utf16"
	"unicode/utf8"
)

// DuplicateKey reports whether the one JSON value data holds has an
// object, at any depth, with two keys that decode to the same string
// (escapes resolved as encoding/json resolves them: "a" and "\u0061" are
// one key). Readers disagree on such a value — encoding/json keeps the
// last, others the first or refuse it — so what one part reads of it
// another may not. ok is false when data is not one well-formed value
// within MaxDepth, or is past 2 GiB: then nothing is said about its keys.
// It walks data once and allocates only for an object of more than
// smallObject keys.
func DuplicateKey(data []byte) (dup, ok bool) {
	if len(data) > math.MaxInt32 {
		return false, false // keySpan's offsets; no event is that large
	}
	end := uniqueValue(data, skipSpace(data, 0), 0)
	switch {
	case end == dupFound:
		// The walk stopped at the duplicate: the rest must be well-formed
		// too for the answer to stand.
		_, ok := Value(data)
		return ok, ok
	case end < 0 || skipSpace(data, end) != len(data):
		return false, false
	}
	return false, true
}

// dupFound is what the walk returns, in place of an index, once it found
// a duplicate key; -1 is malformed input, as for skipValue.
const dupFound = -2

// smallObject is how many keys an object's walk compares pairwise, in an
// array on the stack: an engine event's objects have fewer. A larger
// object's keys go into a map, so a hostile event of many keys costs
// linear time, not quadratic.
const smallObject = 8

// keySpan is a key's contents, as offsets into the walked data, and
// whether they are Plain: two plain keys are equal only byte for byte.
type keySpan struct {
	from, to int32
	plain    bool
}

// uniqueValue is skipValue that also looks for duplicate keys.
func uniqueValue(d []byte, i, depth int) int {
	if i < len(d) {
		switch d[i] {
		case '{':
			return uniqueObject(d, i, depth)
		case '[':
			return uniqueArray(d, i, depth)
		}
	}
	return skipValue(d, i, depth)
}

func uniqueObject(d []byte, i, depth int) int {
	if depth >= MaxDepth {
		return -1
	}
	var (
		small [smallObject]keySpan // the keys so far
		n     int
		many  map[string]struct{} // decoded keys, past smallObject
	)
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return -1
		}
		start := i + 1
		if i = skipString(d, i); i < 0 {
			return -1
		}
		key := d[start : i-1]
		switch {
		case many != nil:
			if seen(many, key) {
				return dupFound
			}
		case n < smallObject:
			plain := Plain(key)
			for _, k := range small[:n] {
				other := d[k.from:k.to]
				if plain && k.plain && string(other) == string(key) || !(plain && k.plain) && keysEqual(other, key) {
					return dupFound
				}
			}
			small[n] = keySpan{from: int32(start), to: int32(i - 1), plain: plain}
			n++
		default:
			many = make(map[string]struct{}, 2*smallObject)
			for _, k := range small[:n] {
				seen(many, d[k.from:k.to])
			}
			if seen(many, key) {
				return dupFound
			}
		}
		if i = skipSpace(d, i); i >= len(d) || d[i] != ':' {
			return -1
		}
		if i = uniqueValue(d, skipSpace(d, i+1), depth+1); i < 0 {
			return i
		}
		if i = skipSpace(d, i); i >= len(d) {
			return -1
		}
		switch d[i] {
		case '}':
			return i + 1
		case ',':
			i = skipSpace(d, i+1)
		default:
			return -1
		}
	}
}

func uniqueArray(d []byte, i, depth int) int {
	if depth >= MaxDepth {
		return -1
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1
	}
	for {
		if i = uniqueValue(d, i, depth+1); i < 0 {
			return i
		}
		if i = skipSpace(d, i); i >= len(d) {
			return -1
		}
		switch d[i] {
		case ']':
			return i + 1
		case ',':
			i = skipSpace(d, i+1)
		default:
			return -1
		}
	}
}

// seen adds a key's decoded text to m and reports whether it was there.
func seen(m map[string]struct{}, key []byte) bool {
	var buf [64]byte
	k, _ := AppendString(buf[:0], append(append([]byte{'"'}, key...), '"'))
	if _, ok := m[string(k)]; ok {
		return true
	}
	m[string(k)] = struct{}{}
	return false
}

// keysEqual reports whether two keys' contents, as written, decode to the
// same string.
func keysEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if Plain(a) && Plain(b) {
		return false
	}
	for len(a) > 0 && len(b) > 0 {
		ra, na := StringRune(a)
		rb, nb := StringRune(b)
		if na == 0 || nb == 0 || ra != rb {
			return false
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) == 0 && len(b) == 0
}

// StringRune decodes the first character of s, the contents of a string
// span between its quotes, as encoding/json decodes it: an escape
// resolved (a surrogate pair to its character, a lone or broken surrogate
// to U+FFFD), a byte of invalid UTF-8 to U+FFFD. It returns the character
// and how many bytes of s it took; n is 0 when s is empty or starts with
// what a string does not hold there (a broken escape, a quote, a control
// character).
func StringRune(s []byte) (r rune, n int) {
	if len(s) == 0 {
		return 0, 0
	}
	c := s[0]
	switch {
	case c == '"' || c < ' ':
		return 0, 0
	case c < utf8.RuneSelf && c != '\\':
		return rune(c), 1
	case c != '\\':
		return utf8.DecodeRune(s) // U+FFFD, 1 for a byte of invalid UTF-8
	case len(s) < 2:
		return 0, 0
	}
	switch s[1] {
	case '"', '\\', '/':
		return rune(s[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		rr := hex4(s)
		if rr < 0 {
			return 0, 0
		}
		if !utf16.IsSurrogate(rr) {
			return rr, 6
		}
		if dec := utf16.DecodeRune(rr, hex4(s[6:])); dec != utf8.RuneError {
			return dec, 12
		}
		return utf8.RuneError, 6
	}
	return 0, 0
}
