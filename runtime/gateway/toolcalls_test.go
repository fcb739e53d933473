package gateway

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/llmplat/llmplat/runtime/admin"
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
	key := s.key(admin.CreateKeyRequest{TeamID: team})
	resp, body := s.do(key, chatBody("llama-8b", true, 1000))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	row := s.waitRow(resp.Header.Get("X-Request-Id"))
	if row.status != "settled" || row.from != "partial" || row.completion != chunks || row.cost == 0 {
		t.Errorf("row %+v, want settled from partial with the %d tool-call chunks relayed, at a cost", row, chunks)
	}
}
