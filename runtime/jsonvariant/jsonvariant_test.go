package jsonvariant

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestOf(t *testing.T) {
	in := `{"id":"x","choices":[{"index":0,"delta":{"content":"a, b: \"c\""}}],"usage":{"prompt_tokens":5}}`
	want := map[string]string{
		"compact":          in,
		"spaced":           `{"id": "x", "choices": [{"index": 0, "delta": {"content": "a, b: \"c\""}}], "usage": {"prompt_tokens": 5}}`,
		"reordered":        `{"usage":{"prompt_tokens":5},"choices":[{"delta":{"content":"a, b: \"c\""},"index":0}],"id":"x"}`,
		"reordered spaced": `{"usage": {"prompt_tokens": 5}, "choices": [{"delta": {"content": "a, b: \"c\""}, "index": 0}], "id": "x"}`,
	}
	vs := Of([]byte(in))
	if len(vs) != 5 {
		t.Fatalf("Of gave %d variants, want 5", len(vs))
	}
	for _, v := range vs {
		if w, ok := want[v.Name]; ok && string(v.Data) != w {
			t.Errorf("%s = %s, want %s", v.Name, v.Data, w)
		}
	}
}

func TestReorderedRefusesFoldingKeys(t *testing.T) {
	for _, in := range []string{`{"a":1,"A":2}`, `{"x":{"k":1,"\u212a":2}}`, `{"a":1,"a":2}`, `{`} {
		if got, ok := Reordered([]byte(in)); ok {
			t.Errorf("Reordered(%s) = %s, want a refusal", in, got)
		}
	}
}

// FuzzOf: every variant decodes to the value the input decodes to.
func FuzzOf(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5e3,{"b":null}],"c":"\u00e9\\\"","d":true}`))
	f.Add([]byte(` [ {} , [] , "x" ] `))
	f.Fuzz(func(t *testing.T, data []byte) {
		var want any
		if json.Unmarshal(data, &want) != nil {
			return
		}
		for _, v := range Of(data) {
			var got any
			if err := json.Unmarshal(v.Data, &got); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s of %s = %s, decodes to %v (%v), want %v", v.Name, data, v.Data, got, err, want)
			}
		}
	})
}
