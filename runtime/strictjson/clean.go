package strictjson

import (
	"bytes"
	"reflect"
)

// maxCleanKeys is how many keys of one object are compared pairwise
// before the scanner keeps them in a map instead.
const maxCleanKeys = 16

// verdict is the scanner's answer about a document.
type verdict int

const (
	unproven verdict = iota // left to explain
	accepted                // Check accepts it
	tooDeep                 // Check refuses it with ErrTooDeep
)

// scan reads data, one JSON value to be decoded into t. It is a proof,
// not a verdict on everything: it answers unproven at anything it does
// not handle (a key with an escape or a non-ASCII byte, any error) and
// leaves the answer to explain. It answers tooDeep only when all it read
// before the nesting past MaxDepth was clean, where explain refuses the
// document at the same place. So it must never answer otherwise than
// explain would; FuzzCleanAgreesWithExplain holds it to that.
func scan(data []byte, t reflect.Type) verdict {
	s := scanner{data: data}
	s.space()
	if !s.value(t, 0) {
		if s.deep {
			return tooDeep
		}
		return unproven
	}
	s.space()
	if s.pos != len(s.data) {
		return unproven
	}
	return accepted
}

// clean reports whether scan accepts data for t.
func clean(data []byte, t reflect.Type) bool { return scan(data, t) == accepted }

// Clean reports whether data, one JSON value that sits depth objects and
// arrays deep in a document (a member of the top-level object: 1), is
// one Check accepts there for a value of type t, nil for free form. It is
// the proof a decoder that reads the document's typed fields itself runs
// on the values it keeps raw; false proves nothing, and the whole
// document is Check's to judge.
func Clean(data []byte, t reflect.Type, depth int) bool {
	s := scanner{data: data}
	s.space()
	if !s.value(t, depth) {
		return false
	}
	s.space()
	return s.pos == len(s.data)
}

// scanner reads a document for scan.
type scanner struct {
	data []byte
	pos  int
	deep bool // a container nested past MaxDepth stopped the scan
}

// shape resolves t as walk does: pointers followed, free-form types nil.
func shape(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage || (t != nil && t.Kind() == reflect.Interface) {
		return nil
	}
	return t
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value reads the value at pos, decoded into t.
func (s *scanner) value(t reflect.Type, depth int) bool {
	if s.pos >= len(s.data) {
		return false
	}
	switch s.data[s.pos] {
	case '{', '[':
		if depth >= MaxDepth {
			s.deep = true
			return false
		}
		if s.data[s.pos] == '{' {
			return s.object(shape(t), depth+1)
		}
		return s.array(shape(t), depth+1)
	case '"':
		return s.str()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	return s.number()
}

// object reads an object from its '{': its keys are unique, and in a
// struct each known key is its field's exact name.
func (s *scanner) object(t reflect.Type, depth int) bool {
	var fields map[string]field
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = fieldsOf(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	s.pos++
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return true
	}
	var keys keySet
	for {
		s.space()
		key, ok := s.key()
		if !ok || !keys.add(key) {
			return false
		}
		child := elem
		if fields != nil {
			f, known := lookup(fields, key)
			switch {
			case known && f.name != string(key):
				return false // a variant spelling
			case known:
				child = f.typ
			default:
				child = nil
			}
		}
		s.space()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return false
		}
		s.pos++
		s.space()
		if !s.value(child, depth) {
			return false
		}
		if done, ok := s.separator('}'); !ok || done {
			return ok
		}
	}
}

// separator reads the ',' or the closing end after a member or an
// element: done when it was end, ok false when it was neither.
func (s *scanner) separator(end byte) (done, ok bool) {
	s.space()
	if s.pos >= len(s.data) {
		return false, false
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		return false, true
	case end:
		s.pos++
		return true, true
	}
	return false, false
}

// array reads an array from its '['.
func (s *scanner) array(t reflect.Type, depth int) bool {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	s.pos++
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return true
	}
	for {
		s.space()
		if !s.value(elem, depth) {
			return false
		}
		if done, ok := s.separator(']'); !ok || done {
			return ok
		}
	}
}

// key reads an object key that is plain printable ASCII without escapes,
// and returns it without its quotes. Any other key is refused: its
// decoded form (escapes resolved, invalid UTF-8 replaced) and its folding
// are explain's to judge.
func (s *scanner) key() ([]byte, bool) {
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return nil, false
	}
	start := s.pos + 1
	for i := start; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			s.pos = i + 1
			return s.data[start:i], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// str reads a string value: any byte but a control character, and the
// escapes JSON defines. Invalid UTF-8 is accepted, as encoding/json
// accepts it.
func (s *scanner) str() bool {
	for i := s.pos + 1; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			s.pos = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			i++
			if i >= len(s.data) {
				return false
			}
			switch s.data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s.data) {
					return false
				}
				for _, h := range s.data[i+1 : i+5] {
					if !isHex(h) {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (s *scanner) literal(word string) bool {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		return false
	}
	s.pos += len(word)
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; what
// follows it is the caller's to check.
func (s *scanner) number() bool {
	d := s.data
	i := s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i)
	default:
		return false
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return false
		}
		i = j
	}
	s.pos = i
	return true
}

// digits returns the index after the run of digits at i.
func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// lookup finds the field an ASCII key folds to, as fieldsOf keys them,
// without building the folded string.
func lookup(fields map[string]field, key []byte) (field, bool) {
	var buf [64]byte
	if len(key) > len(buf) {
		f, ok := fields[fold(string(key))]
		return f, ok
	}
	for i, c := range key {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	f, ok := fields[string(buf[:len(key)])]
	return f, ok
}

// keySet holds the keys of one object: compared pairwise while there are
// few, in a map once there are many (a logit_bias may have thousands).
type keySet struct {
	few  [maxCleanKeys][]byte
	n    int
	many map[string]struct{}
}

// add records key and reports whether it was new.
func (k *keySet) add(key []byte) bool {
	if k.many != nil {
		if _, dup := k.many[string(key)]; dup {
			return false
		}
		k.many[string(key)] = struct{}{}
		return true
	}
	for _, seen := range k.few[:k.n] {
		if bytes.Equal(seen, key) {
			return false
		}
	}
	if k.n < len(k.few) {
		k.few[k.n] = key
		k.n++
		return true
	}
	k.many = make(map[string]struct{}, 2*len(k.few))
	for _, seen := range k.few {
		k.many[string(seen)] = struct{}{}
	}
	k.many[string(key)] = struct{}{}
	return true
}
