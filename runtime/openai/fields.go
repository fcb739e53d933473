package openai

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

// nameSet is the set of JSON names a struct type encodes, built once per
// type: unknownFields checks every key of every request against one.
type nameSet map[string]struct{}

var (
	requestNames = namesOf(reflect.TypeFor[requestFields]())
	messageNames = namesOf(reflect.TypeFor[messageFields]())
)

// namesOf lists the JSON names of t's encoded fields.
func namesOf(t reflect.Type) nameSet {
	names := nameSet{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "-" || name == "" {
			continue
		}
		names[name] = struct{}{}
	}
	return names
}

// unknownFields returns the top-level members of data, a well-formed JSON
// object (or null), whose keys known does not hold, with their raw
// values; nil when there are none. The keys are compared as
// encoding/json would decode them into a map: exactly, escapes resolved.
// It reads data once and allocates only for the members it returns.
func unknownFields(data []byte, known nameSet) map[string]json.RawMessage {
	var extra map[string]json.RawMessage
	m := members{data: data}
	for m.next() {
		var name string
		if bytes.ContainsFunc(m.key, needsDecoding) {
			// Rare: let encoding/json resolve the escapes and replace
			// invalid UTF-8 as its map decode does.
			if json.Unmarshal(m.quoted, &name) != nil {
				continue
			}
			if _, ok := known[name]; ok {
				continue
			}
		} else {
			if _, ok := known[string(m.key)]; ok {
				continue
			}
			name = string(m.key)
		}
		if extra == nil {
			extra = map[string]json.RawMessage{}
		}
		extra[name] = bytes.Clone(m.value)
	}
	return extra
}

// needsDecoding reports whether a key holding r differs from its decoded
// form: an escape, or a byte that may start invalid UTF-8.
func needsDecoding(r rune) bool { return r == '\\' || r >= 0x80 }

// members iterates the members of a well-formed JSON object. It trusts
// its input (encoding/json has validated it) but never reads past it.
type members struct {
	data   []byte
	pos    int
	done   bool
	quoted []byte // the current key with its quotes
	key    []byte // the current key without them, still escaped
	value  []byte // the current value, without surrounding space
}

// next moves to the next member and reports whether there is one.
func (m *members) next() bool {
	if m.done {
		return false
	}
	m.space()
	if m.pos >= len(m.data) || (m.data[m.pos] != '{' && m.data[m.pos] != ',') {
		m.done = true // the closing '}', or null
		return false
	}
	m.pos++
	m.space()
	if m.pos >= len(m.data) || m.data[m.pos] != '"' {
		m.done = true // the '}' of an empty object
		return false
	}
	start := m.pos
	m.pos = skipString(m.data, m.pos)
	m.quoted = m.data[start:m.pos]
	m.key = m.quoted[1 : len(m.quoted)-1]
	m.space()
	m.pos++ // ':'
	m.space()
	start = m.pos
	m.pos = skipValue(m.data, m.pos)
	m.value = m.data[start:m.pos]
	return true
}

func (m *members) space() {
	for m.pos < len(m.data) {
		switch m.data[m.pos] {
		case ' ', '\t', '\n', '\r':
			m.pos++
		default:
			return
		}
	}
}

// skipString returns the index after the string that starts at i.
func skipString(d []byte, i int) int {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(d)
}

// skipValue returns the index after the value that starts at i.
func skipValue(d []byte, i int) int {
	depth := 0
	for i < len(d) {
		switch d[i] {
		case '"':
			i = skipString(d, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the object around a scalar
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return len(d)
}
