package dispatch

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/llmplat/llmplat/runtime/openai"
)

// TestJobCarriesTheEngineBody: the body is encoded once, at NewJob; each
// hop after it only puts the engine's served name in front, and the
// engine reads the client's request streamed, with usage asked for, under
// that name, the members the platform does not know kept.
func TestJobCarriesTheEngineBody(t *testing.T) {
	var req openai.ChatCompletionRequest
	in := `{"model":"llama-8b","messages":[{"role":"user","content":"hi"}],"max_tokens":7,"temperature":0.5,` +
		`"top_k":40,"guided_json":{"type":"object"},"stream_options":{"include_usage":false}}`
	if err := json.Unmarshal([]byte(in), &req); err != nil {
		t.Fatal(err)
	}
	j, err := NewJob("req_1", &req, 12)
	if err != nil {
		t.Fatal(err)
	}
	if j.Model != "llama-8b" || j.PromptEstimate != 12 || j.MaxOutput != 7 || j.RequestID != "req_1" {
		t.Errorf("job = %+v", j)
	}
	for _, served := range []string{"meta-llama/Llama-3.1-8B-Instruct", `odd "name"\é`} {
		body := j.EngineBody(served)
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %v: %s", served, err, body)
		}
		want := map[string]any{
			"model": served, "messages": []any{map[string]any{"role": "user", "content": "hi"}},
			"max_tokens": 7.0, "temperature": 0.5, "top_k": 40.0, "guided_json": map[string]any{"type": "object"},
			"stream": true, "stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("engine body for %q:\n got %v\nwant %v", served, got, want)
		}
	}
	if req.Stream || req.StreamOptions.IncludeUsage || req.Model != "llama-8b" {
		t.Errorf("NewJob changed the client's request: %+v", req)
	}
}

// TestRewriteEditsWhereLocated: the model and the usage are replaced, or
// the usage member removed, at the spans given, in either order.
func TestRewriteEditsWhereLocated(t *testing.T) {
	data := []byte(`{"usage":{"a":1},"model":"sim","x":2}`)
	ev := Event{Data: data, ModelValue: Span{25, 30}, UsageValue: Span{9, 16}, UsageMember: Span{1, 17}}
	if !ev.SpansFit() {
		t.Fatal("spans do not fit")
	}
	for _, tc := range []struct {
		model, usage []byte
		strip        bool
		want         string
	}{
		{[]byte(`"llama"`), nil, false, `{"usage":{"a":1},"model":"llama","x":2}`},
		{[]byte(`"llama"`), []byte(`{"b":2}`), false, `{"usage":{"b":2},"model":"llama","x":2}`},
		{[]byte(`"llama"`), nil, true, `{"model":"llama","x":2}`},
		{[]byte(`"sim"`), nil, false, `{"usage":{"a":1},"model":"sim","x":2}`},
		{nil, nil, false, string(data)},
	} {
		if got := string(ev.Rewrite(tc.model, tc.usage, tc.strip)); got != tc.want {
			t.Errorf("Rewrite(%s, %s, %v) = %s, want %s", tc.model, tc.usage, tc.strip, got, tc.want)
		}
	}
	for _, bad := range []Event{
		{Data: data, ModelValue: Span{25, 40}},
		{Data: data, UsageValue: Span{9, 16}},
		{Data: data, UsageValue: Span{9, 16}, UsageMember: Span{10, 17}},
		{Data: data, ModelValue: Span{5, 20}, UsageValue: Span{9, 16}, UsageMember: Span{1, 17}},
		{Data: data, ModelValue: Span{-1, 3}},
		{Data: data, ModelValue: Span{3, 3}},
	} {
		if bad.SpansFit() {
			t.Errorf("%+v: spans said to fit", bad)
		}
	}
}
