package strictjson

import (
	"bytes"
	"hash/maphash"
	"reflect"
	"slices"
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
	start := s.pos
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
			return ok && keys.unique(s.data[start:s.pos])
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
// few. Once there are many (a logit_bias may have thousands, a hostile
// schema hundreds of thousands) they are only counted, and unique reads
// the object's keys again at its end into a slice of exactly their
// number: eight bytes a key, where a map of the keys cost some hundred
// and a growing slice up to four times eight.
type keySet struct {
	few  [maxCleanKeys][]byte
	n    int
	many int // the keys past the few; unique compares them
}

// add records key and reports whether it was new among the few; among
// many, unique tells once the object ended.
func (k *keySet) add(key []byte) bool {
	if k.many > 0 {
		k.many++
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
	k.many = 1
	return true
}

// keySeed seeds the keys' hashes: one per process, so that no body can be
// made to collide on purpose.
var keySeed = maphash.MakeSeed()

// unique reports whether the keys of obj, a well-formed object whose keys
// were read without escapes, are all different, when there were many:
// their hashes are sorted and compared. Two keys of one hash count as a
// duplicate: the value is then not clean and the exact check (Check)
// decides, so a collision costs time, never a wrong answer.
func (k *keySet) unique(obj []byte) bool {
	if k.many == 0 {
		return true
	}
	hashes := make([]uint64, 0, k.n+k.many)
	for i := 1; ; {
		i = skipSpace(obj, i)
		if obj[i] == '}' {
			break
		}
		end := bytes.IndexByte(obj[i+1:], '"') + i + 1 // no escapes in a key read clean
		hashes = append(hashes, maphash.Bytes(keySeed, obj[i+1:end]))
		i = skipSpace(obj, end+1) + 1 // the colon
		i = skipSpace(obj, skipValue(obj, skipSpace(obj, i)))
		if obj[i] == ',' {
			i++
		}
	}
	slices.Sort(hashes)
	for i := 1; i < len(hashes); i++ {
		if hashes[i] == hashes[i-1] {
			return false
		}
	}
	return true
}

// skipSpace returns the first index from i of d that is not white space.
func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the well-formed value at d[i].
func skipValue(d []byte, i int) int {
	depth := 0
	for ; i < len(d); i++ {
		switch d[i] {
		case '"':
			i = skipString(d, i)
			if depth == 0 {
				return i
			}
			i--
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
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
	}
	return i
}

// skipString returns the index just past the string that opens at d[i].
func skipString(d []byte, i int) int {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}
