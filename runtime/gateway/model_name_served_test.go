package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// servedNameEngine answers as an engine whose served name differs from
// the platform's model name.
func servedNameEngine() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", d)
		}
	})
}

// TestResponsesNameTheRequestedModel: streamed and whole answers carry
// the model the client asked for, not the engine's served name.
func TestResponsesNameTheRequestedModel(t *testing.T) {
	s := newStack(t, stackOpts{engine: servedNameEngine()})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			resp, body := s.do(key, chatBody("llama-8b", stream, 5))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if strings.Contains(body, "meta-llama") || !strings.Contains(body, `"model":"llama-8b"`) {
				t.Errorf("answer names the served model, want llama-8b:\n%s", body)
			}
		})
	}
}
