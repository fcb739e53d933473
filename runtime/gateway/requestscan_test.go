package gateway

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/openai"
)

// TestScanRequestReadsEveryField: each field the request type names, set
// alone beside a model and a message, is read by the one-pass scan, with
// the request the two passes decode: a field added to the type and not
// to the scan would land in Extra and differ.
func TestScanRequestReadsEveryField(t *testing.T) {
	sample := map[reflect.Type]string{
		reflect.TypeFor[string]():                `"x"`,
		reflect.TypeFor[bool]():                  `true`,
		reflect.TypeFor[*bool]():                 `false`,
		reflect.TypeFor[*int64]():                `3`,
		reflect.TypeFor[*float64]():              `0.25`,
		reflect.TypeFor[json.RawMessage]():       `{"a":[1,{"b":null}]}`,
		reflect.TypeFor[*openai.StreamOptions](): `{"include_usage":true,"continuous_usage_stats":false}`,
		reflect.TypeFor[[]openai.Message]():      `[{"role":"user","content":"hi","name":"n","tool_calls":[],"tool_call_id":"c","refusal":null,"audio":{"id":"a"},"x":1}]`,
	}
	typ := reflect.TypeFor[openai.ChatCompletionRequest]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			v, ok := sample[f.Type]
			if !ok {
				t.Fatalf("no sample for %s's type %s", name, f.Type)
			}
			body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"` + name + `":` + v + `}`)
			if name == "model" || name == "messages" {
				body = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`)
				body = []byte(strings.Replace(string(body), `"`+name+`":`, `"`+name+`":`+v+`,"ignored_`+name+`":`, 1))
			}
			got, verdict := scanRequest(body, nil)
			if verdict != scanned {
				t.Fatalf("the scan left %s to the two passes", body)
			}
			want, refusal := decodeChecked(body)
			if refusal != nil {
				t.Fatalf("the two passes refused %s: %s", body, refusal.Error.Message)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("scanned %+v, want %+v", got, want)
			}
		})
	}
}

// TestScanRequestLeavesTheUnusual: what only the two passes can judge
// exactly — escaped, non-ASCII, variant or duplicate keys at any depth,
// nesting past the bound, a value of the wrong type, an integer written
// as a fraction, a body that is not an object — is left to them, and so
// refused as they refuse it.
func TestScanRequestLeavesTheUnusual(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	var many strings.Builder
	for i := range maxScannedKeys + 1 {
		many.WriteString(`,"k` + strings.Repeat("x", i) + `":0`)
	}
	for _, tc := range []struct{ name, body, code string }{
		{"duplicate", `{"model":"m","model":"n",` + msgs + `}`, "duplicate_key"},
		{"variant", `{"model":"m","MAX_TOKENS":5,` + msgs + `}`, "variant_key"},
		{"kelvin", `{"model":"m","max_to` + "\u212a" + `ens":5,` + msgs + `}`, "variant_key"},
		{"escaped key", `{"mo\u0064el":"m",` + msgs + `}`, ""},
		{"duplicate in a message", `{"model":"m","messages":[{"role":"user","content":"a","content":"b"}]}`, "duplicate_key"},
		{"variant in a message", `{"model":"m","messages":[{"ROLE":"user","content":"a"}]}`, "variant_key"},
		{"duplicate in a tool's schema", `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"f","name":"g"}}]}`, "duplicate_key"},
		{"duplicate unknown", `{"model":"m",` + msgs + `,"top_k":1,"top_k":2}`, "duplicate_key"},
		{"variant in stream_options", `{"model":"m","stream":true,"stream_options":{"Include_Usage":true},` + msgs + `}`, "variant_key"},
		{"too deep", `{"model":"m",` + msgs + `,"metadata":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`, "nesting_too_deep"},
		{"fraction", `{"model":"m","max_tokens":1.5,` + msgs + `}`, "invalid_type"},
		{"wrong type", `{"model":5,` + msgs + `}`, "invalid_type"},
		{"a message not an object", `{"model":"m","messages":["hi"]}`, "invalid_type"},
		{"not an object", `[1]`, "invalid_json"},
		{"many unknown keys", `{"model":"m",` + msgs + many.String() + `}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, verdict := scanRequest([]byte(tc.body), nil); verdict == scanned {
				t.Fatalf("the scan read %s itself", tc.body)
			}
			_, refusal := decodeRequest([]byte(tc.body))
			if tc.code == "" {
				if refusal != nil {
					t.Errorf("refused %s: %s", tc.body, refusal.Error.Message)
				}
				return
			}
			if refusal == nil {
				t.Fatalf("accepted %s", tc.body)
			}
			if got := string(refusal.Error.Code); got != `"`+tc.code+`"` {
				t.Errorf("refused with %s, want %s", got, tc.code)
			}
		})
	}
}

// TestScanRequestReadsCommonBodies: the bodies clients send are read in
// the one pass, or the fast path is dead code.
func TestScanRequestReadsCommonBodies(t *testing.T) {
	for _, b := range decodeBodies {
		if _, verdict := scanRequest([]byte(b.body), nil); verdict != scanned {
			t.Errorf("%s: left to the two passes", b.name)
		}
	}
}
