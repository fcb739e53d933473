package jsonscan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestDuplicateKey(t *testing.T) {
	many := func(n int, last string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(`"` + last + `":0}`)
		return b.String()
	}
	tests := []struct {
		name, in string
		dup, ok  bool
	}{
		{"an engine's chunk", events[1], false, true},
		{"a top-level duplicate", `{"usage":{},"choices":[],"usage":null}`, true, true},
		{"a duplicate in a delta", `{"choices":[{"delta":{"content":"a","content":"b"}}]}`, true, true},
		{"a duplicate deep in an array", `[1,[{"a":{"b":1,"b":2}}]]`, true, true},
		{"one key escaped", `{"content":"a","\u0063ontent":"b"}`, true, true},
		{"a surrogate pair against its character", `{"\ud83d\ude00":1,"😀":2}`, true, true},
		{"two invalid bytes decode to U+FFFD both", "{\"\xff\":1,\"\xfe\":2}", true, true},
		{"keys that differ by case", `{"Content":1,"content":2}`, false, true},
		{"equal keys in sibling objects", `{"a":{"x":1},"b":{"x":1}}`, false, true},
		{"many distinct keys", many(40, "k40"), false, true},
		{"many keys, the last repeating one", many(40, "k3"), true, true},
		{"not JSON", `{"a":1`, false, false},
		{"trailing bytes", `{"a":1} x`, false, false},
		{"too deep", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dup, ok := DuplicateKey([]byte(tt.in))
			if dup != tt.dup || ok != tt.ok {
				t.Errorf("DuplicateKey(%.80q) = %v, %v; want %v, %v", tt.in, dup, ok, tt.dup, tt.ok)
			}
		})
	}
}

func TestDuplicateKeyDoesNotAllocate(t *testing.T) {
	data := []byte(events[1])
	if n := testing.AllocsPerRun(100, func() { DuplicateKey(data) }); n != 0 {
		t.Errorf("DuplicateKey allocates %v times an event", n)
	}
}

// FuzzDuplicateKey checks DuplicateKey against encoding/json's tokens,
// whose keys come decoded.
func FuzzDuplicateKey(f *testing.F) {
	for _, e := range events {
		f.Add([]byte(e))
	}
	for _, s := range []string{`{"a":1,"\u0061":2}`, `{"a":[{"b":1},{"b":1,"b":2}]}`, "{\"\xff\":1,\"\xfe\":2}", `{"\ud83d":1,"\ude00":2}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"\u0061":0}`, `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dup, ok := DuplicateKey(data)
		if !ok {
			if json.Valid(data) && !tooDeep(data) {
				t.Fatalf("DuplicateKey(%q) not ok; encoding/json reads it", data)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("DuplicateKey(%q) ok; encoding/json refuses it", data)
		}
		if want := dupByTokens(t, data); dup != want {
			t.Fatalf("DuplicateKey(%q) = %v; encoding/json's keys say %v", data, dup, want)
		}
	})
}

// dupByTokens finds a duplicate key with encoding/json's token stream.
func dupByTokens(t *testing.T, data []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	type level struct {
		object bool
		keys   map[string]bool
		key    bool // the next string is a key
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, &level{object: v == '{', keys: map[string]bool{}, key: v == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.object && top.key {
				if top.keys[v] {
					return true
				}
				top.keys[v] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.object {
			top.key = true
		}
	}
}

// BenchmarkDuplicateKey is the gateway's check of every event it relays,
// beside Value, the plain walk of the same events.
func BenchmarkDuplicateKey(b *testing.B) {
	data := make([][]byte, len(events))
	for i, e := range events {
		data[i] = []byte(e)
	}
	for _, tc := range []struct {
		name string
		walk func([]byte)
	}{
		{"DuplicateKey", func(d []byte) { DuplicateKey(d) }},
		{"Value", func(d []byte) { Value(d) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, d := range data {
					tc.walk(d)
				}
			}
		})
	}
}
