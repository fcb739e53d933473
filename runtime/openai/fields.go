package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"reflect"
	"slices"
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
			name = decodeKey(m.quoted)
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

// decodeKey returns a quoted key as encoding/json decodes it into a map:
// escapes resolved, invalid UTF-8 replaced. It is rare, and kept apart
// so that the string it decodes into is allocated only when it runs.
func decodeKey(quoted []byte) string {
	var name string
	_ = json.Unmarshal(quoted, &name) // a key of a well-formed object always decodes
	return name
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

// withExtra marshals v and adds the extra fields; a typed field wins over an
// extra one of the same name. With extra fields the members come sorted by
// key, as encoding/json writes a map: the form the body always had. The
// typed members are written as v encoded them, not decoded and encoded
// again.
func withExtra(v any, extra map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	type member struct {
		key           string
		quoted, value []byte
	}
	all := make([]member, 0, 32)
	m := members{data: b}
	for m.next() {
		// A typed field's name is plain ASCII: v's own encoding is its
		// key exactly.
		all = append(all, member{key: string(m.key), quoted: m.quoted, value: m.value})
	}
	typed := len(all)
	for k, raw := range extra {
		if slices.ContainsFunc(all[:typed], func(t member) bool { return t.key == k }) {
			continue
		}
		all = append(all, member{key: k, value: raw})
	}
	slices.SortFunc(all, func(a, b member) int { return cmp.Compare(a.key, b.key) })
	out := make([]byte, 0, len(b)+64*(len(all)-typed))
	out = append(out, '{')
	for i, mb := range all {
		if i > 0 {
			out = append(out, ',')
		}
		if mb.quoted == nil {
			// An extra member: its key escaped and its value compacted
			// and escaped for HTML, as json.Marshal writes a map's.
			if mb.quoted, err = json.Marshal(mb.key); err != nil {
				return nil, err
			}
			if mb.value, err = json.Marshal(json.RawMessage(mb.value)); err != nil {
				return nil, err
			}
		}
		out = append(out, mb.quoted...)
		out = append(out, ':')
		out = append(out, mb.value...)
	}
	return append(out, '}'), nil
}
