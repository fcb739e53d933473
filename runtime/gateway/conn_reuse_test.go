package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	oa "github.com/llmplat/llmplat/runtime/openai"
)

// TestClientStoppingAtDoneKeepsItsConnection: a client that stops reading
// a stream at [DONE] and closes the body (as the loadgen and many SDKs do)
// has read the whole response: the answer's end leaves with the response's
// own end. Its next request reuses the connection rather than paying a new
// handshake, and — with max_streams 1 — finds the first request's stream
// slot already free.
func TestClientStoppingAtDoneKeepsItsConnection(t *testing.T) {
	s := newStack(t, stackOpts{})
	key := s.key(adminwire.CreateKeyRequest{TeamID: s.team("t", 10*credit), MaxStreams: 1})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	body := `{"model":"llama-8b","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
	for i := range 20 {
		var reused bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Fatalf("request %d: %s: %s (the previous stream's slot was not free at its [DONE])", i, resp.Status, b)
		}
		r := oa.NewSSEReader(resp.Body)
		for {
			data, err := r.Next()
			if err != nil {
				t.Fatalf("request %d: stream ended without [DONE]: %v", i, err)
			}
			if oa.IsDone(data) {
				break
			}
		}
		resp.Body.Close() // at [DONE], without reading on to the end
		if i > 0 && !reused {
			t.Fatalf("request %d opened a new connection: the one before was dropped at [DONE]", i)
		}
	}
}
