package jsonscan

import "unicode/utf8"

// Match finds key, as written, among a struct's JSON field names. It
// returns the index of the name key equals exactly, or -1 for a key that
// no name matches, which encoding/json would ignore. It reports false for
// a key whose meaning the caller cannot know without encoding/json: one
// written with an escape or with bytes past ASCII (encoding/json unescapes
// and folds Unicode), or one equal to a name but for ASCII case
// (encoding/json matches it to the field).
func Match(key []byte, names []string) (int, bool) {
	if !Plain(key) {
		return -1, false
	}
	for i, n := range names {
		if string(key) == n {
			return i, true
		}
	}
	for _, n := range names {
		if equalFoldASCII(key, n) {
			return -1, false
		}
	}
	return -1, true
}

// Plain reports whether a key or string's contents, as written, are ASCII
// with no escape: what it decodes to is exactly what it holds.
func Plain(raw []byte) bool {
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func equalFoldASCII(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// IsNull reports whether a value span is null.
func IsNull(v []byte) bool { return string(v) == "null" }

// IsEmptyArray reports whether a value span is an array with no elements.
func IsEmptyArray(v []byte) bool {
	return len(v) >= 2 && v[0] == '[' && skipSpace(v, 1) == len(v)-1 && v[len(v)-1] == ']'
}

// Int returns the integer a number span holds, as encoding/json decodes
// one into an int64: a plain integer in range; a fraction, an exponent or
// an overflow reports false.
func Int(v []byte) (int64, bool) {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case neg && n <= 1<<63:
		return int64(-n), true
	case !neg && n < 1<<63:
		return int64(n), true
	}
	return 0, false
}

// Literal returns a string span's contents when they decode to exactly
// themselves (no escape, valid UTF-8), so the caller can use them without
// a copy. It reports false for anything else, a non-string included.
func Literal(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil, false
	}
	s := v[1 : len(v)-1]
	for i := 0; i < len(s); {
		c := s[i]
		if c == '\\' {
			return nil, false
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			return nil, false
		}
		i += n
	}
	return s, true
}

// AppendString appends what a well-formed string span decodes to, as
// encoding/json decodes it: escapes resolved, a lone or broken surrogate
// and each byte of invalid UTF-8 replaced by U+FFFD. It reports false for
// a span that is not a string.
func AppendString(dst, v []byte) ([]byte, bool) {
	if lit, ok := Literal(v); ok {
		return append(dst, lit...), true
	}
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return dst, false
	}
	s := v[1 : len(v)-1]
	for len(s) > 0 {
		r, n := StringRune(s)
		if n == 0 {
			return dst, false
		}
		dst = utf8.AppendRune(dst, r)
		s = s[n:]
	}
	return dst, true
}

// hex4 returns the rune of a \uXXXX escape at the start of s, or -1.
func hex4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
