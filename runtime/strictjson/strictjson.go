// Package strictjson refuses the JSON that Go's encoding/json would read
// differently from other parsers. encoding/json matches object keys to
// struct fields case-insensitively, with Unicode folding (the Kelvin sign
// K matches k, the long s ſ matches s), and the last of duplicate keys
// wins, where a Python or JavaScript engine behind the platform reads keys
// exactly. A body whose "max_tokens" is 1 for the gateway and 8000 for the
// engine is a billing bypass. Check walks a document beside the Go type it
// will be decoded into and refuses, at any depth:
//
//   - a key that appears twice in one object (compared exactly; a key
//     naming a struct's field is compared as encoding/json compares them,
//     so "model" and "MODEL" are duplicates there);
//   - in an object decoded into a struct, a key that is not a field's name
//     but folds to one ("Max_Tokens", "max_to\u212aens").
//
// Keys a struct does not know are allowed (they are checked for duplicates
// below them); so are objects of free form (json.RawMessage, maps,
// interfaces), where only exact duplicates are refused: a JSON schema may
// well name both "Name" and "name".
//
// Check is meant to be the first pass over an untrusted body: it refuses a
// document nested deeper than MaxDepth (ErrTooDeep), so every pass after
// it is bounded too, and it costs memory linear in the document's size.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// MaxDepth is how deeply the objects and arrays of a checked document
// may nest. A chat request with JSON-schema tools nests 20 to 30 levels
// (a schema nests 2 to 4 levels per level of its own, under 6 of the
// request), so 64 leaves room for any real one, while a hostile body
// meets the bound long before encoding/json's own limit of 10000.
const MaxDepth = 64

// Error is a refused document: Path names the key at fault as a request
// parameter ("messages[0].role"), for the OpenAI error's param.
type Error struct {
	Path string
	// Duplicate is true for a repeated key, false for a variant spelling.
	Duplicate bool
	Msg       string
}

func (e *Error) Error() string { return e.Msg }

// ErrInvalid wraps a document that is not well-formed JSON.
var ErrInvalid = errors.New("strictjson: invalid JSON")

// ErrTooDeep is a document whose objects and arrays nest deeper than
// MaxDepth: it is refused before any other pass reads it.
var ErrTooDeep = fmt.Errorf("strictjson: objects and arrays nested deeper than %d levels", MaxDepth)

// Check reports whether data, one JSON value, may be decoded into a value
// of type t without encoding/json reading it differently from an exact
// parser. It returns an *Error, ErrTooDeep, or ErrInvalid wrapped, or nil.
//
// A byte scanner accepts the common document in one pass without
// allocating; whatever it cannot prove acceptable is walked again with
// encoding/json's decoder, whose verdict and error stand. Both passes
// stop at MaxDepth and cost memory linear in len(data): a refusal's path
// is built only when it is reported.
func Check(data []byte, t reflect.Type) error {
	switch scan(data, t) {
	case accepted:
		return nil
	case tooDeep:
		return ErrTooDeep
	}
	return explain(data, t)
}

// explain is Check by encoding/json's tokenizer: slow, but its errors
// name the fault as encoding/json sees it.
func explain(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := walker{dec: dec}
	if err := w.value(t); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: more than one value", ErrInvalid)
	}
	return nil
}

// rawMessage is json.RawMessage's type: free-form JSON.
var rawMessage = reflect.TypeFor[json.RawMessage]()

// walker is explain's walk. The path to the value being read is a stack
// of steps, turned into a string only for an error: a path string built
// at every level costs memory quadratic in the depth.
type walker struct {
	dec  *json.Decoder
	path []step
}

// step is one level of a path: an object's key, or an array's index
// (key unset).
type step struct {
	key   string
	index int
	isKey bool
}

// at returns the path with key appended, as a request parameter.
func (w *walker) at(key string) string {
	var b strings.Builder
	for _, s := range w.path {
		switch {
		case !s.isKey:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		}
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(key)
	return b.String()
}

// value checks the next value of the decoder, decoded into t (nil: free
// form).
func (w *walker) value(t reflect.Type) error {
	tok, err := w.dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	t = shape(t)
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	if len(w.path) >= MaxDepth {
		return ErrTooDeep
	}
	switch d {
	case '{':
		return w.object(t)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			w.path = append(w.path, step{index: i})
			err := w.value(elem)
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
		if _, err := w.dec.Token(); err != nil { // ]
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	return nil
}

// object checks an object's members after its '{'.
func (w *walker) object(t reflect.Type) error {
	var fields map[string]field // by folded name, when t is a struct
	var elem reflect.Type       // the members' type, when t is a map
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = fieldsOf(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	seen := map[string]bool{}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%w: object key is not a string", ErrInvalid)
		}
		// A struct's fields are matched as encoding/json matches them
		// (folded); any other key is kept exactly as it came.
		cmp, name := key, key
		f, known := fields[fold(key)]
		if known {
			cmp, name = "\x00"+f.name, f.name
		}
		if seen[cmp] {
			at := w.at(name)
			return &Error{Path: at, Duplicate: true, Msg: fmt.Sprintf("the key %q appears more than once", at)}
		}
		seen[cmp] = true
		child := elem
		if fields != nil {
			switch {
			case known && f.name != key:
				at := w.at(name)
				return &Error{Path: at, Msg: fmt.Sprintf(
					"the key %q is a variant spelling of %q: keys must match exactly", w.at(key), at)}
			case known:
				child = f.typ
			default:
				child = nil // unknown: kept as it came, checked for duplicates
			}
		}
		w.path = append(w.path, step{key: name, isKey: true})
		err = w.value(child)
		w.path = w.path[:len(w.path)-1]
		if err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil { // }
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// field is a struct field as encoding/json names it.
type field struct {
	name string
	typ  reflect.Type
}

var fieldCache sync.Map // reflect.Type → map[string]field

// fieldsOf returns t's JSON fields by folded name, embedded structs'
// promoted fields included, as encoding/json would decode them.
func fieldsOf(t reflect.Type) map[string]field {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]field)
	}
	m := map[string]field{}
	collect(t, m, 0)
	fieldCache.Store(t, m)
	return m
}

func collect(t reflect.Type, into map[string]field, depth int) {
	if depth > 8 {
		return
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				collect(et, into, depth+1)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		k := fold(name)
		if _, shadowed := into[k]; !shadowed || depth == 0 {
			into[k] = field{name: name, typ: ft}
		}
	}
}

// fold maps a key to the form encoding/json compares: ASCII letters
// upper-cased, every other rune to the smallest rune of its Unicode
// folding orbit (so K, k and the Kelvin sign are one, as are s, S and ſ).
func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			continue
		}
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// foldRune returns the smallest rune of r's simple folding orbit.
func foldRune(r rune) rune {
	low := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		low = min(low, f)
	}
	return low
}
