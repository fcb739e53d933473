package tokens

import (
	"encoding/json"
	"testing"

	"github.com/llmplat/llmplat/runtime/openai"
)

// TestEstimateRequestCountsWhatTemplatesRender: tool definitions, tool
// calls and media parts reach the engine's prompt, so the reservation
// counts them; a plain chat costs what EstimateChat says.
func TestEstimateRequestCountsWhatTemplatesRender(t *testing.T) {
	user := []openai.Message{openai.TextMessage("user", "What is the weather in Paris today?")}
	plain := EstimateChat(user)
	tools := json.RawMessage(`[{"type":"function","function":{"name":"get_weather","description":"Current weather for a city, with temperature and wind","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`)
	image := json.RawMessage(`[{"type":"text","text":"What is in this picture?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},{"type":"image_url","image_url":{"url":"https://example.com/b.png"}}]`)
	call := openai.Message{Role: "assistant", ToolCalls: json.RawMessage(`[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]`)}
	answer := openai.Message{Role: "tool", ToolCallID: "call_1", Content: json.RawMessage(`"18 degrees, light wind"`)}

	tests := []struct {
		name    string
		req     openai.ChatCompletionRequest
		atLeast int64
	}{
		{"plain chat", openai.ChatCompletionRequest{Messages: user}, plain},
		{"tool definitions", openai.ChatCompletionRequest{Messages: user, Tools: tools}, plain + estimateRaw(tools)},
		{"two images", openai.ChatCompletionRequest{Messages: []openai.Message{{Role: "user", Content: image}}}, 2 * MediaPartTokens},
		{"a tool call and its answer", openai.ChatCompletionRequest{Messages: append(append(user[:1:1], call), answer)},
			EstimateChat(append(append(user[:1:1], call), answer)) + estimateRaw(call.ToolCalls)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EstimateRequest(&tt.req)
			if got < tt.atLeast {
				t.Errorf("EstimateRequest = %d, want at least %d", got, tt.atLeast)
			}
			if exact := ChatPromptTokens(tt.req.Messages); got < exact {
				t.Errorf("EstimateRequest = %d, below the exact %d", got, exact)
			}
		})
	}
	if got := EstimateRequest(&openai.ChatCompletionRequest{Messages: user}); got != plain {
		t.Errorf("a plain chat estimates %d, EstimateChat %d: want the same", got, plain)
	}
	if got := EstimateRequest(&openai.ChatCompletionRequest{Messages: user, Tools: tools}); got <= plain {
		t.Errorf("tools add nothing to the estimate (%d)", got)
	}
}

func TestMediaParts(t *testing.T) {
	tests := []struct {
		content string
		want    int64
	}{
		{`"just text"`, 0},
		{`[{"type":"text","text":"a"}]`, 0},
		{` [{"type":"image_url","image_url":{"url":"x"}},{"type":"input_audio","input_audio":{}},{"type":"text","text":"b"}]`, 2},
		{`[not json`, 0},
		{``, 0},
	}
	for _, tt := range tests {
		if got := mediaParts([]byte(tt.content)); got != tt.want {
			t.Errorf("mediaParts(%s) = %d, want %d", tt.content, got, tt.want)
		}
	}
}
