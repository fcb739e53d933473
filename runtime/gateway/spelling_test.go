package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/jsonvariant"
)

// pythonEngine answers as an engine written in Python does: every event
// spaced as json.dumps writes it ("usage": {"prompt_tokens": 5, …}), its
// members in another order than vLLM's. It streams n content chunks with
// a running usage (the gateway asks for it), then a finish chunk and the
// usage chunk; broken, it drops the connection after the content instead.
func pythonEngine(n int, broken bool) http.Handler {
	const prompt = 5
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(compact string) {
			fmt.Fprintf(w, "data: %s\n\n", jsonvariant.Spaced([]byte(compact)))
		}
		usage := func(done int) string {
			return fmt.Sprintf(`{"completion_tokens":%d,"prompt_tokens":%d,"total_tokens":%d}`, done, prompt, prompt+done)
		}
		send(`{"choices":[{"delta":{"role":"assistant","content":""},"index":0}],"model":"sim-8b","id":"c1","object":"chat.completion.chunk","created":1,"usage":` + usage(0) + `}`)
		for i := 1; i <= n; i++ {
			send(`{"usage":` + usage(i) + `,"choices":[{"finish_reason":null,"delta":{"content":"hi"},"index":0}],"model":"sim-8b","id":"c1","object":"chat.completion.chunk","created":1}`)
		}
		if broken {
			http.NewResponseController(w).Flush()
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		send(`{"choices":[{"finish_reason":"stop","delta":{},"index":0}],"model":"sim-8b","id":"c1","object":"chat.completion.chunk","created":1,"usage":` + usage(n) + `}`)
		send(`{"usage":` + usage(n) + `,"choices":[],"model":"sim-8b","id":"c1","object":"chat.completion.chunk","created":1}`)
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
}

// TestPythonEngineIsBilled: an engine that spaces its JSON as Python does
// is billed its exact counts, streamed or not, and a stream of it that
// breaks settles from its running usage; its answer reads as vLLM's
// would. Each was billed 0 when events were read by byte patterns.
func TestPythonEngineIsBilled(t *testing.T) {
	const chunks = 7
	for _, tc := range []struct {
		name     string
		stream   bool
		broken   bool
		settleBy string
	}{
		{"whole answer", false, false, "exact"},
		{"stream", true, false, "exact"},
		{"broken stream", true, true, "partial"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, stackOpts{engine: pythonEngine(chunks, tc.broken)})
			team := s.team("alpha", 10*credit)
			key := s.key(adminwire.CreateKeyRequest{TeamID: team})
			resp, body := s.do(key, chatBody("llama-8b", tc.stream, 100))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			row := s.waitRow(resp.Header.Get("X-Request-Id"))
			if row.status != "settled" || row.from != tc.settleBy || row.prompt != 5 || row.completion != chunks || row.cost == 0 {
				t.Errorf("row %+v, want settled from %s at 5 prompt and %d completion tokens, at a cost", row, tc.settleBy, chunks)
			}
			if strings.Contains(body, "sim-8b") {
				t.Errorf("the answer names the engine's model:\n%s", body)
			}
			if tc.stream {
				if n := strings.Count(body, `"usage"`); n > 1 {
					t.Errorf("the stream shows the running usage the client did not ask for (%d usages):\n%s", n, body)
				}
				return
			}
			var got struct {
				Choices []struct {
					Message      struct{ Content string } `json:"message"`
					FinishReason string                   `json:"finish_reason"`
				} `json:"choices"`
				Usage struct {
					CompletionTokens int64 `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil || len(got.Choices) != 1 {
				t.Fatalf("body %s: %v", body, err)
			}
			if c := got.Choices[0]; c.Message.Content != strings.Repeat("hi", chunks) || c.FinishReason != "stop" || got.Usage.CompletionTokens != chunks {
				t.Errorf("answer %+v, want %d his, stop and %d completion tokens", got, chunks, chunks)
			}
		})
	}
}
