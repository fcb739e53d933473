package engineclient

import (
	"fmt"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"reflect"
	"testing"

	"github.com/llmplat/llmplat/runtime/jsonvariant"
)

// pythonEvents are an answer's events as an engine written in Python
// sends them (json.dumps' default spacing), each with its compact form.
var pythonEvents = []struct{ spaced, compact string }{
	{`{"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`},
	{`{"id": "x", "choices": [{"index": 0, "delta": {"content": "hi"}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"content":"hi"}}]}`},
	{`{"id": "x", "choices": [{"index": 0, "delta": {"content": "hi"}}], "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}`,
		`{"id":"x","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`},
	{`{"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`},
	{`{"id": "x", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}`,
		`{"id":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`},
}

// sameEvent reports how two events differ in what they tell, Data aside.
func sameEvent(got, want dispatch.Event) error {
	got.Data, want.Data = nil, nil
	// Where the members lie moves with the spelling; what they are does not.
	got.ModelValue, got.UsageValue, got.UsageMember = dispatch.Span{}, dispatch.Span{}, dispatch.Span{}
	want.ModelValue, want.UsageValue, want.UsageMember = dispatch.Span{}, dispatch.Span{}, dispatch.Span{}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("got %+v (usage %v, progress %v), want %+v (usage %v, progress %v)",
			got, got.Usage, got.Progress, want, want.Usage, want.Progress)
	}
	return nil
}

// TestParseEventReadsAnySpelling: an event spaced as Python writes it,
// indented, or with its keys in another order tells what its compact
// form tells: an engine written in Python is billed like vLLM.
func TestParseEventReadsAnySpelling(t *testing.T) {
	for i, e := range pythonEvents {
		want := ParseEvent([]byte(e.compact))
		if err := sameEvent(ParseEvent([]byte(e.spaced)), want); err != nil {
			t.Errorf("python event %d %s: %v", i, e.spaced, err)
		}
		if i > 0 && want.Tokens == 0 && want.Usage == nil {
			t.Errorf("compact event %d %s tells nothing", i, e.compact)
		}
	}
	var all []string
	all = append(all, commonEvents...)
	for _, e := range pythonEvents {
		all = append(all, e.compact)
	}
	for _, e := range all {
		want := ParseEvent([]byte(e))
		for _, v := range jsonvariant.Of([]byte(e)) {
			if err := sameEvent(ParseEvent(v.Data), want); err != nil {
				t.Errorf("%s %s: %v", v.Name, v.Data, err)
			}
		}
	}
}
