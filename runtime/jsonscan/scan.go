package jsonscan

// MaxDepth is how deeply values may nest below the value being scanned.
// Engine events nest four deep; past this the scan reports malformed input
// and its caller falls back to encoding/json (which allows 10000), so the
// limit only bounds the scanner's recursion.
const MaxDepth = 256

// Value returns the one JSON value data holds, without the whitespace
// around it. It reports false when data is not exactly one well-formed
// value.
func Value(data []byte) ([]byte, bool) {
	i := skipSpace(data, 0)
	end := skipValue(data, i, 0)
	if end < 0 || skipSpace(data, end) != len(data) {
		return nil, false
	}
	return data[i:end], true
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace returns the index of the first non-whitespace byte at or after i.
func skipSpace(d []byte, i int) int {
	for i < len(d) && isSpace(d[i]) {
		i++
	}
	return i
}

// skipValue returns the index just past the value that starts at d[i],
// or -1 when no well-formed value starts there.
func skipValue(d []byte, i, depth int) int {
	if i >= len(d) {
		return -1
	}
	switch c := d[i]; {
	case c == '"':
		return skipString(d, i)
	case c == '{':
		return skipObject(d, i, depth)
	case c == '[':
		return skipArray(d, i, depth)
	case c == 't':
		return skipLiteral(d, i, "true")
	case c == 'f':
		return skipLiteral(d, i, "false")
	case c == 'n':
		return skipLiteral(d, i, "null")
	case c == '-' || ('0' <= c && c <= '9'):
		return skipNumber(d, i)
	}
	return -1
}

func skipLiteral(d []byte, i int, lit string) int {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// skipString returns the index just past the string that starts at d[i]:
// control characters are refused and escapes checked, as JSON requires;
// other bytes, invalid UTF-8 included, pass as encoding/json lets them.
func skipString(d []byte, i int) int {
	for i++; i < len(d); {
		for i < len(d) && plainInString[d[i]] {
			i++ // the common run of text, one test a byte
		}
		if i >= len(d) {
			return -1
		}
		c := d[i]
		switch {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i+1 >= len(d) {
				return -1
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(d)-i < 6 || !isHex(d[i+2]) || !isHex(d[i+3]) || !isHex(d[i+4]) || !isHex(d[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default:
			i++
		}
	}
	return -1
}

// plainInString marks the bytes a string holds as they are: all but the
// quote, the backslash and control characters.
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipNumber returns the index just past the number that starts at d[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(d []byte, i int) int {
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && isDigit(d[i]):
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	default:
		return -1
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return -1
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return -1
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	return i
}

func skipObject(d []byte, i, depth int) int {
	if depth >= MaxDepth {
		return -1
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return -1
		}
		if i = skipString(d, i); i < 0 {
			return -1
		}
		if i = skipSpace(d, i); i >= len(d) || d[i] != ':' {
			return -1
		}
		if i = skipValue(d, skipSpace(d, i+1), depth+1); i < 0 {
			return -1
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

func skipArray(d []byte, i, depth int) int {
	if depth >= MaxDepth {
		return -1
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1
	}
	for {
		if i = skipValue(d, i, depth+1); i < 0 {
			return -1
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
