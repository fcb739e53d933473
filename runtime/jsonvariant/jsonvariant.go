// Package jsonvariant respells a JSON text as other texts of the same
// value: spaced as Python's json.dumps writes it, indented, with every
// object's members in reverse order. Differential tests and fuzz targets
// use it to hold a reader of engine JSON to one answer for every spelling
// an engine may send, not only the compact one vLLM writes.
package jsonvariant

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/llmplat/llmplat/runtime/jsonscan"
)

// Variant is one respelling of a JSON text.
type Variant struct {
	Name string
	Data []byte
}

// Of returns data's respellings: compact, spaced, indented, reordered and
// reordered-and-spaced. It returns nothing for data that is not one valid
// JSON value, and no reordered forms when an object has two keys a
// decode could match to one field (their order then decides the value).
func Of(data []byte) []Variant {
	if !json.Valid(data) {
		return nil
	}
	var compact, indented bytes.Buffer
	if json.Compact(&compact, data) != nil || json.Indent(&indented, data, "", "  ") != nil {
		return nil
	}
	vs := []Variant{
		{"compact", compact.Bytes()},
		{"spaced", Spaced(data)},
		{"indented", indented.Bytes()},
	}
	if r, ok := Reordered(data); ok {
		vs = append(vs, Variant{"reordered", r}, Variant{"reordered spaced", Spaced(r)})
	}
	return vs
}

// Spaced returns valid JSON data as Python's json.dumps writes it by
// default: one space after each colon and comma, none elsewhere.
func Spaced(data []byte) []byte {
	out := make([]byte, 0, len(data)+len(data)/4)
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case inString:
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case c == ':' || c == ',':
			out = append(out, c, ' ')
		default:
			out = append(out, c)
			inString = c == '"'
		}
	}
	return out
}

// Reordered returns valid JSON data with every object's members in
// reverse order, keys and scalars spelled as they were. It reports false
// when data is not valid, nests past jsonscan.MaxDepth, or has an object
// with two keys that fold to one name as encoding/json matches fields.
func Reordered(data []byte) ([]byte, bool) {
	v, ok := jsonscan.Value(data)
	if !ok {
		return nil, false
	}
	return reorder(nil, v)
}

func reorder(dst, v []byte) ([]byte, bool) {
	switch v[0] {
	case '{':
		type member struct{ key, value []byte }
		var ms []member
		var names []string
		o := jsonscan.Members(v)
		for k, val, more := o.Next(); more; k, val, more = o.Next() {
			var name string
			if json.Unmarshal(append(append([]byte{'"'}, k...), '"'), &name) != nil {
				return nil, false
			}
			for _, n := range names {
				if strings.EqualFold(n, name) {
					return nil, false
				}
			}
			names = append(names, name)
			ms = append(ms, member{k, val})
		}
		if o.Malformed() {
			return nil, false
		}
		dst = append(dst, '{')
		for i := len(ms) - 1; i >= 0; i-- {
			dst = append(append(append(dst, '"'), ms[i].key...), '"', ':')
			var ok bool
			if dst, ok = reorder(dst, ms[i].value); !ok {
				return nil, false
			}
			if i > 0 {
				dst = append(dst, ',')
			}
		}
		return append(dst, '}'), true
	case '[':
		dst = append(dst, '[')
		a := jsonscan.Elements(v)
		first := true
		for e, more := a.Next(); more; e, more = a.Next() {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			var ok bool
			if dst, ok = reorder(dst, e); !ok {
				return nil, false
			}
		}
		if a.Malformed() {
			return nil, false
		}
		return append(dst, ']'), true
	}
	return append(dst, v...), true
}

// Depth returns how deeply data's objects and arrays nest, brackets in
// strings aside: what a depth limit's tests compare a verdict with. It
// reads any bytes, JSON or not.
func Depth(data []byte) int {
	depth, deepest, in := 0, 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case in:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
