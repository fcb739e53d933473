package strictjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

type part struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Parts   []part          `json:"parts"`
}

type embedded struct {
	Seed int `json:"seed"`
}

type request struct {
	embedded
	Model     string             `json:"model"`
	MaxTokens *int64             `json:"max_tokens,omitempty"`
	Messages  []message          `json:"messages"`
	Meta      map[string]message `json:"meta"`
	Free      any                `json:"free"`
	Hidden    string             `json:"-"`
}

func TestCheck(t *testing.T) {
	typ := reflect.TypeFor[request]()
	tests := []struct {
		name, body string
		path       string // "" when accepted
		duplicate  bool
	}{
		{"plain", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "", false},
		{"unknown keys pass", `{"model":"m","top_k":5,"x":{"y":1}}`, "", false},
		{"kelvin sign", "{\"max_tokens\":1,\"max_to\u212aens\":8000}", "max_tokens", true},
		{"kelvin sign alone", "{\"max_to\u212aens\":8000}", "max_tokens", false},
		{"long s", "{\"me\u017f\u017fages\":[]}", "messages", false},
		{"upper case", `{"MODEL":"m"}`, "model", false},
		{"exact duplicate", `{"model":"a","model":"b"}`, "model", true},
		{"case duplicate", `{"model":"a","Model":"b"}`, "model", true},
		{"nested variant", `{"messages":[{"role":"user"},{"Role":"system"}]}`, "messages[1].role", false},
		{"nested duplicate", `{"messages":[{"role":"user","role":"system"}]}`, "messages[0].role", true},
		{"deep variant", `{"messages":[{"role":"user","parts":[{"TYPE":"text"}]}]}`, "messages[0].parts[0].type", false},
		{"embedded field", `{"SEED":1}`, "seed", false},
		{"map member variant", `{"meta":{"a":{"ROLE":"x"}}}`, "meta.a.role", false},
		{"map keys are free", `{"meta":{"a":{},"A":{}}}`, "", false},
		{"free form keeps case", `{"free":{"Name":1,"name":2},"messages":[{"content":{"Type":1,"type":2}}]}`, "", false},
		{"free form exact duplicate", `{"free":{"a":{"b":1,"b":2}}}`, "free.a.b", true},
		{"raw content duplicate", `{"messages":[{"content":[{"type":"text","type":"image_url"}]}]}`, "messages[0].content[0].type", true},
		{"hidden field is unknown", `{"Hidden":1,"hidden":2}`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check([]byte(tt.body), typ)
			var e *Error
			switch {
			case tt.path == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.path == "":
			case !errors.As(err, &e):
				t.Fatalf("err = %v, want *Error at %s", err, tt.path)
			case e.Path != tt.path || e.Duplicate != tt.duplicate:
				t.Fatalf("err at %q (duplicate %v): %v; want %q (duplicate %v)", e.Path, e.Duplicate, err, tt.path, tt.duplicate)
			}
		})
	}
}

func TestCheckInvalid(t *testing.T) {
	for _, body := range []string{`{"model":`, `{"a":1}{"b":2}`, `[1,2`, ``, `{"a" 1}`} {
		if err := Check([]byte(body), reflect.TypeFor[request]()); !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%q) = %v, want ErrInvalid", body, err)
		}
	}
}

func TestFold(t *testing.T) {
	for _, pair := range [][2]string{{"max_tokens", "MAX_TOKENS"}, {"max_to\u212aens", "max_tokens"}, {"me\u017f\u017fages", "messages"}} {
		if fold(pair[0]) != fold(pair[1]) {
			t.Errorf("fold(%q) = %q, fold(%q) = %q: want equal", pair[0], fold(pair[0]), pair[1], fold(pair[1]))
		}
	}
	if fold("model") == fold("modal") {
		t.Error("distinct keys fold alike")
	}
}

// FuzzCheck: whatever Check accepts, encoding/json reads every known field
// exactly as a parser that matches keys exactly would.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":5,"messages":[{"role":"user"}]}`,
		"{\"max_to\u212aens\":8000,\"max_tokens\":1}",
		`{"MODEL":"x","model":"y"}`,
		`{"messages":[{"ROLE":"a"}],"seed":3}`,
	} {
		f.Add([]byte(s))
	}
	for _, s := range nestings {
		f.Add(s.body(MaxDepth))
		f.Add(s.body(MaxDepth + s.levels))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if Check(data, reflect.TypeFor[request]()) != nil {
			return
		}
		var got request
		if json.Unmarshal(data, &got) != nil {
			return
		}
		var exact map[string]json.RawMessage
		if json.Unmarshal(data, &exact) != nil {
			return
		}
		var model string
		if raw, ok := exact["model"]; ok {
			_ = json.Unmarshal(raw, &model)
		}
		if got.Model != model {
			t.Fatalf("encoding/json read model %q, an exact parser %q: %s", got.Model, model, data)
		}
		var maxTokens *int64
		if raw, ok := exact["max_tokens"]; ok {
			_ = json.Unmarshal(raw, &maxTokens)
		}
		if (got.MaxTokens == nil) != (maxTokens == nil) || (got.MaxTokens != nil && *got.MaxTokens != *maxTokens) {
			t.Fatalf("encoding/json read max_tokens %v, an exact parser %v: %s", got.MaxTokens, maxTokens, data)
		}
	})
}
