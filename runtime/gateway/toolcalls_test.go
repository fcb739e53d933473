package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// toolCallEngine streams a role chunk and n tool-call chunks, then drops
// the connection without [DONE], as an engine that dies or a client that
// hangs up on purpose would leave it.
func toolCallEngine(n int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":""}}]}}]}`+"\n\n")
		for range n - 1 {
			fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"function":{"arguments":"ab"}}]}}]}`+"\n\n")
		}
		http.NewResponseController(w).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // no [DONE], no usage: a broken stream
		}
	})
}

// TestBrokenToolCallStreamIsBilled: 200 tool-call chunks relayed, then
// the stream breaks; the row settles from the relayed count instead of
// being cancelled at cost 0 (a client could drop tool-call streams on
// purpose and pay nothing).
func TestBrokenToolCallStreamIsBilled(t *testing.T) {
	const chunks = 200
	s := newStack(t, stackOpts{engine: toolCallEngine(chunks)})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	resp, body := s.do(key, chatBody("llama-8b", true, 1000))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	row := s.waitRow(resp.Header.Get("X-Request-Id"))
	if row.status != "settled" || row.from != "partial" || row.completion != chunks || row.cost == 0 {
		t.Errorf("row %+v, want settled from partial with the %d tool-call chunks relayed, at a cost", row, chunks)
	}
}

// wholeToolCallEngine answers with two tool calls, streamed in pieces
// (with reasoning before them), and finishes properly.
func wholeToolCallEngine() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			`{"role":"assistant","content":""}`,
			`{"reasoning_content":"need the "}`,
			`{"reasoning_content":"weather"}`,
			`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"weather","arguments":""}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`,
			`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"time","arguments":"{}"}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`,
		} {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"llama-8b\",\"choices\":[{\"index\":0,\"delta\":%s}]}\n\n", d)
		}
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
}

// TestNonStreamedToolCalls: a non-streamed answer carries the tool calls
// the engine streamed, each whole (id, name, arguments joined in order),
// with content null and the reasoning, as OpenAI and vLLM answer.
func TestNonStreamedToolCalls(t *testing.T) {
	s := newStack(t, stackOpts{engine: wholeToolCallEngine()})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	resp, body := s.do(key, chatBody("llama-8b", false, 100))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var got struct {
		Choices []struct {
			Message struct {
				Content          *string `json:"content"`
				ReasoningContent string  `json:"reasoning_content"`
				ToolCalls        []struct {
					ID       string                           `json:"id"`
					Type     string                           `json:"type"`
					Function struct{ Name, Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || len(got.Choices) != 1 {
		t.Fatalf("body %s: %v", body, err)
	}
	m := got.Choices[0].Message
	if m.Content != nil || m.ReasoningContent != "need the weather" || got.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 2 {
		t.Fatalf("message %+v, finish %q; want content null, the reasoning and two tool calls", m, got.Choices[0].FinishReason)
	}
	a, b := m.ToolCalls[0], m.ToolCalls[1]
	if a.ID != "call_a" || a.Type != "function" || a.Function.Name != "weather" || a.Function.Arguments != `{"city":"Paris"}` ||
		b.ID != "call_b" || b.Function.Name != "time" || b.Function.Arguments != "{}" {
		t.Errorf("tool calls %+v, want weather({\"city\":\"Paris\"}) and time({})", m.ToolCalls)
	}
	if r := s.waitRow(resp.Header.Get("X-Request-Id")); r.status != "settled" || r.completion != 9 {
		t.Errorf("row %+v, want settled at the engine's 9 tokens", r)
	}
}
