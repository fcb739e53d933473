package enginesim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmplat/llmplat/runtime/openai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testStart is the fixed wall and simulated time of every test.
var testStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testConfig is deterministic: a FakeClock, a fixed wall clock, counting
// ids and a fixed seed.
func testConfig() Config {
	var n atomic.Uint64
	return Config{
		Clock:     NewFakeClock(testStart),
		WallClock: func() time.Time { return testStart },
		NewID:     func() string { return fmt.Sprintf("chatcmpl-%032x", n.Add(1)) },
		Seed:      42,
	}
}

func newTestSim(t *testing.T, cfg Config) *Sim {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// serve starts an HTTP server for s, closed when the test ends.
func serve(t *testing.T, s *Sim) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// runEngine runs s.Run until the test ends.
func runEngine(t *testing.T, s *Sim) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// chatBody returns a request body for the sim's model with a user message
// and the given extra top-level fields.
func chatBody(t *testing.T, s *Sim, content string, fields map[string]any) []byte {
	t.Helper()
	body := map[string]any{"model": s.ServedModelName(), "messages": []openai.Message{openai.TextMessage("user", content)}}
	for k, v := range fields {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends a chat request and returns once the response headers arrive.
func post(ctx context.Context, t *testing.T, url string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return resp
}

// readEvent returns the next raw event ("data: …\n\n") of a stream.
func readEvent(t *testing.T, br *bufio.Reader) []byte {
	t.Helper()
	var ev []byte
	for {
		line, err := br.ReadBytes('\n')
		ev = append(ev, line...)
		if err != nil {
			t.Fatalf("read event: %v (got %q)", err, ev)
		}
		if len(line) == 1 && len(ev) > 1 {
			return ev
		}
	}
}

// eventKind classifies a raw event.
func eventKind(t *testing.T, ev []byte) (kind string, chunk openai.ChatCompletionChunk) {
	t.Helper()
	data := bytes.TrimSuffix(bytes.TrimPrefix(ev, []byte("data: ")), []byte("\n\n"))
	switch {
	case openai.IsDone(data):
		return "done", chunk
	case openai.StreamError(data) != nil:
		return "error", chunk
	}
	if err := json.Unmarshal(data, &chunk); err != nil {
		t.Fatalf("decode chunk %q: %v", data, err)
	}
	switch {
	case len(chunk.Choices) == 0:
		return "usage", chunk
	case chunk.Choices[0].Delta.Role != "":
		return "role", chunk
	}
	return "content", chunk
}

// stepAndRead runs one engine step and reads the events it caused: up to
// the token's content chunk, or to the end of the stream when the step
// finished it or killed the engine.
func stepAndRead(t *testing.T, s *Sim, br *bufio.Reader, out *bytes.Buffer) (ended bool) {
	t.Helper()
	if _, ok := s.Step(context.Background()); !ok {
		t.Fatal("Step had nothing to do")
	}
	dead := s.Faults().Dead // then the step ended the stream with an error
	for {
		ev := readEvent(t, br)
		out.Write(ev)
		kind, chunk := eventKind(t, ev)
		switch {
		case kind == "done":
			return true
		case kind == "content" && chunk.Choices[0].FinishReason == nil && !dead:
			return false
		}
	}
}

// scrape reads one sample from the /metrics endpoint: the series whose
// name and labels start with series ("vllm:num_requests_running{").
func scrape(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, series) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("parse %q: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("no series %s in /metrics:\n%s", series, text)
	return 0
}

// errorOf decodes an error response.
func errorOf(t *testing.T, resp *http.Response) openai.Error {
	t.Helper()
	defer resp.Body.Close()
	var body openai.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("decode error body: %v", err)
	}
	return body.Error
}

// scrapeRegistry reads the value of an unlabelled-by-variable series (a
// gauge or counter) from the simulator's registry.
func scrapeRegistry(t *testing.T, s *Sim, name string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
