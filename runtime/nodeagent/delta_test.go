package nodeagent

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestValidDelta(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"valid", []byte(`{"choices":[{"delta":{"content":"héllo"}}]}`), `{"choices":[{"delta":{"content":"héllo"}}]}`},
		{"lone continuation byte", []byte("{\"choices\":[{\"delta\":{\"content\":\"a\x80b\"}}]}"), `{"choices":[{"delta":{"content":"a` + "\uFFFD" + `b"}}]}`},
		{"truncated sequence", []byte("{\"c\":\"\xe2\x82\"}"), `{"c":"` + "\uFFFD" + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := validDelta(tt.in)
			if !utf8.Valid(got) || string(got) != tt.want {
				t.Errorf("validDelta(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("validDelta(%q) = %q is not JSON", tt.in, got)
			}
			if len(tt.in) > 0 && &got[0] == &tt.in[0] {
				t.Error("validDelta returned the engine's buffer, which the next Recv reuses")
			}
		})
	}
}

// TestFinishReasonAnySpelling: the agent finds the engine's finish reason
// however the chunk is spaced or ordered; an engine written in Python
// would otherwise end every answer with an empty reason, which tells the
// server the stream broke.
func TestFinishReasonAnySpelling(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"compact", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, "stop"},
		{"python", `{"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}`, "stop"},
		{"space before the colon", `{"choices":[{"finish_reason" : "length"}]}`, "length"},
		{"indented", "{\n  \"choices\": [\n    {\n      \"finish_reason\":\n        \"stop\"\n    }\n  ]\n}", "stop"},
		{"reordered", `{"choices":[{"finish_reason": "tool_calls","delta":{}}],"id":"x"}`, "tool_calls"},
		{"null", `{"choices": [{"finish_reason": null, "delta": {"content": "finish_reason"}}]}`, ""},
		{"none", `{"choices": [{"delta": {"content": "hi"}}]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := finishReason([]byte(tt.data)); got != tt.want {
				t.Errorf("finishReason(%s) = %q, want %q", tt.data, got, tt.want)
			}
		})
	}
}
