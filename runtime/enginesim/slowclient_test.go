package enginesim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// TestSlowClientDoesNotStallEngine blocks one client's writes completely:
// another stream finishes, the engine finishes the blocked one too, and
// once unblocked it receives its tokens coalesced into few chunks.
func TestSlowClientDoesNotStallEngine(t *testing.T) {
	s := newTestSim(t, testConfig())
	runEngine(t, s)
	srv := serve(t, s)
	const answer = 200
	body := func(q string) []byte {
		return chatBody(t, s, q, map[string]any{"stream": true, "max_tokens": answer, "ignore_eos": true,
			"stream_options": map[string]any{"include_usage": true}})
	}

	stuck := newBlockingWriter()
	req, err := http.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body("slow client")))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.Handler().ServeHTTP(stuck, req)
	}()
	defer func() { stuck.release(); <-served }()
	<-stuck.blocked // the slow client's handler is stuck in a write

	resp := post(context.Background(), t, srv.URL, body("fast client"))
	fast, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.HasSuffix(fast, []byte("data: [DONE]\n\n")) {
		t.Fatalf("fast stream did not complete: %v", err)
	}
	testenv.Eventually(t, "the engine to finish both", func() bool { return s.Stats().Finished == 2 })

	stuck.release()
	<-served
	content, usage, contentChunks := parseStream(t, stuck.bytes())
	if usage == nil || usage.CompletionTokens != answer || tokens.Count(content) != answer {
		t.Fatalf("slow stream: usage %+v, %d tokens of content; want %d", usage, tokens.Count(content), answer)
	}
	if contentChunks > 3 {
		t.Errorf("slow stream had %d content chunks, want its piled-up tokens coalesced", contentChunks)
	}
}

// blockingWriter is a ResponseWriter whose writes block until released,
// like a client that stopped reading with full socket buffers.
type blockingWriter struct {
	header  http.Header
	blocked chan struct{} // closed at the first write
	gate    chan struct{}
	once    sync.Once
	gone    sync.Once
	mu      sync.Mutex
	buf     bytes.Buffer
}

func newBlockingWriter() *blockingWriter {
	return &blockingWriter{header: http.Header{}, blocked: make(chan struct{}), gate: make(chan struct{})}
}

func (w *blockingWriter) Header() http.Header { return w.header }
func (w *blockingWriter) WriteHeader(int)     {}
func (w *blockingWriter) Flush()              {}
func (w *blockingWriter) release()            { w.gone.Do(func() { close(w.gate) }) }

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.blocked) })
	<-w.gate
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *blockingWriter) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf.Bytes())
}

// parseStream returns a stream's text, its usage and its number of content
// chunks.
func parseStream(t *testing.T, stream []byte) (string, *openai.Usage, int) {
	t.Helper()
	var content strings.Builder
	var usage *openai.Usage
	chunks := 0
	r := openai.NewSSEReader(bytes.NewReader(stream))
	for {
		data, err := r.Next()
		if errors.Is(err, io.EOF) {
			return content.String(), usage, chunks
		}
		if err != nil {
			t.Fatal(err)
		}
		if openai.IsDone(data) {
			continue
		}
		var c openai.ChatCompletionChunk
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		if c.Usage != nil {
			usage = c.Usage
			continue
		}
		if d := c.Choices[0].Delta; d.Role == "" && d.Content != nil {
			content.WriteString(*d.Content)
			chunks++
		}
	}
}
