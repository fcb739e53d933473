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

// Check reports whether data, one JSON value, may be decoded into a value
// of type t without encoding/json reading it differently from an exact
// parser. It returns an *Error, or ErrInvalid wrapped, or nil.
//
// A byte scanner accepts the common document in one pass without
// allocating; whatever it cannot prove acceptable is walked again with
// encoding/json's decoder, whose verdict and error stand.
func Check(data []byte, t reflect.Type) error {
	if clean(data, t) {
		return nil
	}
	return explain(data, t)
}

// explain is Check by encoding/json's tokenizer: slow, but its errors
// name the fault as encoding/json sees it.
func explain(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walk(dec, t, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: more than one value", ErrInvalid)
	}
	return nil
}

// rawMessage is json.RawMessage's type: free-form JSON.
var rawMessage = reflect.TypeFor[json.RawMessage]()

// walk checks the next value of dec, decoded into t (nil: free form).
func walk(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage || (t != nil && t.Kind() == reflect.Interface) {
		t = nil
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	switch d {
	case '{':
		return walkObject(dec, t, path)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walk(dec, elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ]
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	return nil
}

// walkObject checks an object's members after its '{'.
func walkObject(dec *json.Decoder, t reflect.Type, path string) error {
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
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%w: object key is not a string", ErrInvalid)
		}
		at := join(path, key)
		// A struct's fields are matched as encoding/json matches them
		// (folded); any other key is kept exactly as it came.
		cmp := key
		f, known := fields[fold(key)]
		if known {
			cmp, at = "\x00"+f.name, join(path, f.name)
		}
		if seen[cmp] {
			return &Error{Path: at, Duplicate: true, Msg: fmt.Sprintf("the key %q appears more than once", at)}
		}
		seen[cmp] = true
		child := elem
		if fields != nil {
			switch {
			case known && f.name != key:
				return &Error{Path: at, Msg: fmt.Sprintf(
					"the key %q is a variant spelling of %q: keys must match exactly", join(path, key), at)}
			case known:
				child = f.typ
			default:
				child = nil // unknown: kept as it came, checked for duplicates
			}
		}
		if err := walk(dec, child, at); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// join appends key to a parameter path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
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
