package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// events are an engine's chunks for a one-token answer with continuous
// usage: the role chunk, the content chunk, the usage chunk.
var events = []string{
	`{"id":"chatcmpl-e1a5","object":"chat.completion.chunk","created":1796403410,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":11,"total_tokens":11,"completion_tokens":0}}`,
	`{"id":"chatcmpl-e1a5","object":"chat.completion.chunk","created":1796403410,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":"values"},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":11,"total_tokens":12,"completion_tokens":1}}`,
	`{"id":"chatcmpl-e1a5","object":"chat.completion.chunk","created":1796403410,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{"prompt_tokens":11,"total_tokens":12,"completion_tokens":1}}`,
}

func TestValue(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{name: "object", in: ` {"a":[1,-2.5e+3,true,false,null,"x\"\u00e9"]} `, want: `{"a":[1,-2.5e+3,true,false,null,"x\"\u00e9"]}`, ok: true},
		{name: "empty object", in: `{}`, want: `{}`, ok: true},
		{name: "empty array", in: "[ \t\r\n]", want: "[ \t\r\n]", ok: true},
		{name: "string", in: `"a"`, want: `"a"`, ok: true},
		{name: "invalid utf8 in a string", in: "\"\xff\"", want: "\"\xff\"", ok: true},
		{name: "empty", in: ``},
		{name: "trailing data", in: `{} {}`},
		{name: "trailing comma", in: `{"a":1,}`},
		{name: "array trailing comma", in: `[1,]`},
		{name: "leading comma", in: `[,1]`},
		{name: "missing colon", in: `{"a" 1}`},
		{name: "unquoted key", in: `{a:1}`},
		{name: "control character", in: "\"a\nb\""},
		{name: "bad escape", in: `"\x"`},
		{name: "short unicode escape", in: `"\u12"`},
		{name: "leading zero", in: `01`},
		{name: "bare minus", in: `-`},
		{name: "fraction without digits", in: `1.`},
		{name: "exponent without digits", in: `1e+`},
		{name: "bad literal", in: `nul`},
		{name: "literal with a tail", in: `truex`},
		{name: "unclosed object", in: `{"a":1`},
		{name: "unclosed string", in: `"abc`},
		{name: "too deep", in: strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)},
		{name: "as deep as allowed", in: strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), want: strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Value([]byte(tt.in))
			if ok != tt.ok || string(got) != tt.want {
				t.Errorf("Value(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestMembers(t *testing.T) {
	o := Members([]byte(` {"a" : 1, "b\"":{"c":[2]} ,"d":"x"} `))
	var got []string
	for k, v, ok := o.Next(); ok; k, v, ok = o.Next() {
		got = append(got, string(k)+"="+string(v))
	}
	if want := []string{`a=1`, `b\"={"c":[2]}`, `d="x"`}; o.Malformed() || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("members = %q, malformed %v; want %q", got, o.Malformed(), want)
	}
	for _, in := range []string{`{"a":1} x`, `{"a":1,}`, `{"a":1 "b":2}`, `[1]`, `{"a":1`, `{"a":}`} {
		o := Members([]byte(in))
		for _, _, ok := o.Next(); ok; _, _, ok = o.Next() {
		}
		if !o.Malformed() {
			t.Errorf("Members(%q) read to its end is not malformed", in)
		}
	}
}

func TestElements(t *testing.T) {
	a := Elements([]byte(`[ 1 , {"a":[]}, "x" ]`))
	var got []string
	for v, ok := a.Next(); ok; v, ok = a.Next() {
		got = append(got, string(v))
	}
	if want := []string{`1`, `{"a":[]}`, `"x"`}; a.Malformed() || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("elements = %q, malformed %v; want %q", got, a.Malformed(), want)
	}
	for _, in := range []string{`[1] x`, `[1,]`, `[1 2]`, `{}`, `[1`, `[`} {
		a := Elements([]byte(in))
		for _, ok := a.Next(); ok; _, ok = a.Next() {
		}
		if !a.Malformed() {
			t.Errorf("Elements(%q) read to its end is not malformed", in)
		}
	}
}

func TestMatch(t *testing.T) {
	names := []string{"choices", "usage"}
	tests := []struct {
		key  string
		want int
		ok   bool
	}{
		{key: "usage", want: 1, ok: true},
		{key: "choices", want: 0, ok: true},
		{key: "model", want: -1, ok: true},
		{key: "Usage", want: -1},
		{key: "USAGE", want: -1},
		{key: `us\u0061ge`, want: -1},
		{key: "uſage", want: -1}, // the long s folds to s in encoding/json
		{key: "usage ", want: -1, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, ok := Match([]byte(tt.key), names)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Match(%q) = %d, %v; want %d, %v", tt.key, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestInt(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{in: "0", ok: true},
		{in: "-0", ok: true},
		{in: "12", want: 12, ok: true},
		{in: "-12", want: -12, ok: true},
		{in: "9223372036854775807", want: 9223372036854775807, ok: true},
		{in: "-9223372036854775808", want: -9223372036854775808, ok: true},
		{in: "9223372036854775808"},
		{in: "-9223372036854775809"},
		{in: "99999999999999999999"},
		{in: "1.0"},
		{in: "1e2"},
		{in: ""},
		{in: "-"},
		{in: `"1"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := Int([]byte(tt.in))
			if got != tt.want || ok != tt.ok {
				t.Errorf("Int(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestAppendString(t *testing.T) {
	tests := []struct{ in, want string }{
		{in: `"plain"`, want: "plain"},
		{in: `"a\"b\\c\/d\b\f\n\r\t"`, want: "a\"b\\c/d\b\f\n\r\t"},
		{in: `"\u00e9\u20ac"`, want: "é€"},
		{in: `"\ud83d\ude00"`, want: "😀"},
		{in: `"\ud83d"`, want: "\uFFFD"},
		{in: `"\ud83dx"`, want: "\uFFFDx"},
		{in: `"\ude00\ud83d"`, want: "\uFFFD\uFFFD"},
		{in: "\"a\xffb\"", want: "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := AppendString(nil, []byte(tt.in))
			if !ok || string(got) != tt.want {
				t.Errorf("AppendString(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
			}
		})
	}
}

// FuzzValue checks the scanner against encoding/json: the same inputs are
// well-formed, strings decode to the same text and integers to the same
// number.
func FuzzValue(f *testing.F) {
	for _, e := range events {
		f.Add([]byte(e))
	}
	for _, s := range []string{`"\ud83d\ude00"`, `"\ud83d"`, "\"\xff\"", `-0`, `1e5`, `[1,{"a":null}]`, `"us\u0061ge"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, ok := Value(data)
		if want := json.Valid(data); ok != want && !(want && tooDeep(data)) {
			t.Fatalf("Value(%q) ok = %v; json.Valid = %v", data, ok, want)
		}
		if !ok {
			return
		}
		if want := bytes.TrimSpace(data); !bytes.Equal(v, want) {
			t.Fatalf("Value(%q) = %q; want %q", data, v, want)
		}
		var s string
		if json.Unmarshal(data, &s) == nil && v[0] == '"' {
			got, ok := AppendString(nil, v)
			if !ok || string(got) != s {
				t.Fatalf("AppendString(%q) = %q, %v; encoding/json decodes %q", v, got, ok, s)
			}
			if lit, ok := Literal(v); ok && string(lit) != s {
				t.Fatalf("Literal(%q) = %q; encoding/json decodes %q", v, lit, s)
			}
		}
		var n int64
		err := json.Unmarshal(data, &n)
		if got, ok := Int(v); (err == nil && v[0] != 'n') != ok || (ok && got != n) {
			t.Fatalf("Int(%q) = %d, %v; encoding/json: %d, %v", v, got, ok, n, err)
		}
		walk(t, v)
	})
}

// walk reads every object and array in v through the iterators, which
// must agree that v is well-formed.
func walk(t *testing.T, v []byte) {
	switch v[0] {
	case '{':
		o := Members(v)
		for _, val, ok := o.Next(); ok; _, val, ok = o.Next() {
			walk(t, val)
		}
		if o.Malformed() {
			t.Fatalf("Members(%q) is malformed; Value accepted it", v)
		}
	case '[':
		a := Elements(v)
		for val, ok := a.Next(); ok; val, ok = a.Next() {
			walk(t, val)
		}
		if a.Malformed() {
			t.Fatalf("Elements(%q) is malformed; Value accepted it", v)
		}
	}
}

// tooDeep reports whether data nests past MaxDepth, where the scanner
// refuses what encoding/json accepts.
func tooDeep(data []byte) bool {
	depth, deepest := 0, 0
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest > MaxDepth
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}
