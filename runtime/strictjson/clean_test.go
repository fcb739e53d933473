package strictjson

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// cleanBodies are documents the scanner must accept on its own: the
// common shapes of a request. When it gives them up to explain, Check is
// still right but pays the tokenizer's allocations again.
var cleanBodies = []string{
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
	` {"model":"m","seed":-1.5e+3,"free":{"Name":1,"name":[true,false,null]},"meta":{"a":{"role":"x"},"A":{}}} `,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"caf\u00e9 \"q\" \\ \/ \n"}],"parts":[]}],"x":{}}`,
	`{"model":"` + "caf\xc3\xa9 \xff" + `","unknown":{"Model":1,"model":2},"free":0}`,
	`[1,{"a":[]},"s"]`,
	`{"free":{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17}}`,
	`{"model":"m","a_very_long_unknown_key_that_is_longer_than_sixty_four_bytes_for_the_lookup_buffer":1}`,
}

func TestCleanAcceptsCommonBodies(t *testing.T) {
	typ := reflect.TypeFor[request]()
	for _, body := range cleanBodies {
		if !clean([]byte(body), typ) {
			t.Errorf("clean(%s) = false, want true", body)
		}
		if err := explain([]byte(body), typ); err != nil {
			t.Errorf("explain(%s) = %v, want nil", body, err)
		}
	}
}

// TestCleanGivesUp: the scanner accepts nothing Check refuses, and leaves
// what it does not handle to explain.
func TestCleanGivesUp(t *testing.T) {
	var many strings.Builder // a duplicate past the pairwise comparisons
	many.WriteString(`{"free":{`)
	for i := range 2 * maxCleanKeys {
		fmt.Fprintf(&many, `"k%d":0,`, i)
	}
	many.WriteString(`"k3":1}}`)
	for _, body := range []string{
		``, ` `, `{`, `{"model":}`, `{"model":"m",}`, `[1,]`, `{"a":1}{"b":2}`, `{"a" 1}`, `01`, `1.`, `-`, `1e`, `.5`, `+1`,
		`tru`, `nul`, `"\x"`, `"\u12"`, "\"\x01\"", `{"a":1 "b":2}`, `[1 2]`, `{1:2}`,
		`{"model":"a","model":"b"}`, `{"MODEL":"m"}`, `{"max_tokens":1,"MAX_TOKENS":2}`,
		`{"messages":[{"role":"a","role":"b"}]}`, `{"messages":[{"ROLE":"a"}]}`, `{"SEED":1}`,
		`{"mo\u0064el":"m"}`, "{\"max_to\u212aens\":1}", `{"free":{"a":1,"a":2}}`, many.String(),
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	} {
		if clean([]byte(body), reflect.TypeFor[request]()) {
			t.Errorf("clean(%q) = true, want false", body)
		}
	}
}

// FuzzCleanAgreesWithExplain: whatever the scanner accepts, the
// tokenizer-based walk accepts too, so Check keeps its strictness; what
// it finds too deep, the walk finds too deep.
func FuzzCleanAgreesWithExplain(f *testing.F) {
	for _, s := range cleanBodies {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		"{\"max_to\u212aens\":8000,\"max_tokens\":1}",
		`{"MODEL":"x","model":"y"}`,
		`{"messages":[{"ROLE":"a"}],"seed":3}`,
		`{"Hidden":1,"hidden":2}`,
		`{"model":"llama-8b","stream":true,"stream_options":{"include_usage":true},"temperature":0.7,"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`,
	} {
		f.Add([]byte(s))
	}
	types := []reflect.Type{reflect.TypeFor[request](), reflect.TypeFor[map[string]message](), reflect.TypeFor[[]part](), nil}
	for _, s := range nestings {
		f.Add(s.body(MaxDepth))
		f.Add(s.body(MaxDepth + s.levels))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range types {
			switch scan(data, typ) {
			case accepted:
				if err := explain(data, typ); err != nil {
					t.Fatalf("the scanner accepted for %v what explain refuses (%v): %q", typ, err, data)
				}
			case tooDeep:
				if err := explain(data, typ); !errors.Is(err, ErrTooDeep) {
					t.Fatalf("the scanner found too deep for %v what explain answers %v: %q", typ, err, data)
				}
			}
		}
	})
}

// BenchmarkCheck compares Check, which scans a clean document once, with
// the tokenizer-based walk it used to be.
func BenchmarkCheck(b *testing.B) {
	body := []byte(`{"model":"m","max_tokens":5,"seed":1,"free":{"a":[1,2]},"messages":[{"role":"system","content":"be brief"},` +
		`{"role":"user","content":[{"type":"text","text":"hi"}],"parts":[{"type":"text","text":"x"}]}]}`)
	typ := reflect.TypeFor[request]()
	for _, impl := range []struct {
		name  string
		check func([]byte, reflect.Type) error
	}{{"new", Check}, {"ref", explain}} {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := impl.check(body, typ); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCleanAtDepth: a value found inside a document is held to the
// document's bound on nesting: what fits under MaxDepth at its own depth
// passes, one level more does not, and Clean accepts nothing Check would
// refuse as the whole document.
func TestCleanAtDepth(t *testing.T) {
	nest := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	for _, depth := range []int{0, 1, 3, MaxDepth - 1} {
		if !Clean(nest(MaxDepth-depth), nil, depth) {
			t.Errorf("depth %d: %d levels refused, the bound allows them", depth, MaxDepth-depth)
		}
		if Clean(nest(MaxDepth-depth+1), nil, depth) {
			t.Errorf("depth %d: %d levels accepted, one past the bound", depth, MaxDepth-depth+1)
		}
	}
	typ := reflect.TypeFor[request]()
	for _, body := range cleanBodies {
		if !Clean([]byte(body), typ, 0) {
			t.Errorf("Clean(%s) = false, want true", body)
		}
	}
	for _, body := range []string{`{"free":{"a":1,"a":2}}`, `{"MODEL":"m"}`, `{"a":1} x`, ` `} {
		if Clean([]byte(body), typ, 0) {
			t.Errorf("Clean(%q) = true, want false", body)
		}
	}
}
