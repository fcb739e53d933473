package engineclient

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/llmplat/llmplat/runtime/openai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// goldenEngine serves a recorded vLLM stream and remembers the last body.
func goldenEngine(t *testing.T, file string, gotBody *openai.ChatCompletionRequest) *httptest.Server {
	t.Helper()
	stream, err := os.ReadFile(filepath.Join("..", "openai", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gotBody != nil {
			_ = json.NewDecoder(r.Body).Decode(gotBody)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(stream)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func job(model string, stream bool) *dispatch.Job {
	j, err := dispatch.NewJob("req_1", &openai.ChatCompletionRequest{
		Model: model, Stream: stream, Messages: []openai.Message{openai.TextMessage("user", "hi")},
	}, 1)
	if err != nil {
		panic(err)
	}
	return j
}

func drain(t *testing.T, s dispatch.Stream) (events []dispatch.Event, end error) {
	t.Helper()
	for {
		ev, err := s.Recv()
		if err != nil {
			return events, err
		}
		ev.Data = append([]byte(nil), ev.Data...)
		events = append(events, ev)
	}
}

func TestDirectStreamsAndAsksForUsage(t *testing.T) {
	var body openai.ChatCompletionRequest
	srv := goldenEngine(t, "stream_include_usage.golden", &body)
	d := NewDirect(map[string][]Target{"llama-8b": {{URL: srv.URL, ServedName: "meta-llama/Llama-3.1-8B-Instruct"}}}, srv.Client())
	s, err := d.Dispatch(context.Background(), job("llama-8b", false))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	events, end := drain(t, s)
	if !errors.Is(end, io.EOF) {
		t.Fatalf("end = %v, want io.EOF", end)
	}
	if !body.Stream || !body.WantsUsage() || body.Model != "meta-llama/Llama-3.1-8B-Instruct" {
		t.Errorf("engine body: stream=%v usage=%v model=%q; want streamed, usage asked, served name", body.Stream, body.WantsUsage(), body.Model)
	}
	var tokens int64
	var usage *openai.Usage
	for _, ev := range events {
		tokens += ev.Tokens
		if ev.Usage != nil {
			usage = ev.Usage
		}
	}
	if tokens != 2 {
		t.Errorf("counted tokens = %d, want 2 (one per content chunk)", tokens)
	}
	if usage == nil || usage.CompletionTokens != 2 || usage.PromptTokens != 12 {
		t.Errorf("usage = %+v, want 12 prompt / 2 completion", usage)
	}
}

func TestDirectErrors(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		model   string
		check   func(t *testing.T, err error)
	}{
		{
			name:  "unknown model",
			model: "nope",
			check: func(t *testing.T, err error) {
				if !errors.Is(err, dispatch.ErrUnknownModel) {
					t.Errorf("err = %v, want dispatch.ErrUnknownModel", err)
				}
			},
		},
		{
			name:  "engine refuses",
			model: "m",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write(openai.NewEngineError(400, "input_tokens", "too long").Marshal())
			},
			check: func(t *testing.T, err error) {
				var e *dispatch.Error
				if !errors.As(err, &e) {
					t.Fatalf("err = %v, want *dispatch.Error", err)
				}
				if e.Status != 400 || e.Body.Error.Param != nil || e.RetryAfter != 7*time.Second {
					t.Errorf("error = %d %+v %v, want 400, no param, 7s", e.Status, e.Body.Error, e.RetryAfter)
				}
				if !strings.Contains(e.Upstream, "too long") {
					t.Errorf("upstream %q, want the engine's words kept for the log", e.Upstream)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.handler
			if h == nil {
				h = func(http.ResponseWriter, *http.Request) {}
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			d := NewDirect(map[string][]Target{"m": {{URL: srv.URL, ServedName: "m"}}}, srv.Client())
			_, err := d.Dispatch(context.Background(), job(tt.model, true))
			tt.check(t, err)
		})
	}
}

// TestEngineErrorBodyNotReflected: whatever an upstream answers with an
// error status (here an internal service's secret, in the OpenAI shape
// and not) never reaches the client's error body; a bounded, valid UTF-8
// start of it is kept for the server's log.
func TestEngineErrorBodyNotReflected(t *testing.T) {
	const secret = "internal-secret-7f3a"
	tests := []struct {
		name   string
		status int
		body   string
		want   int
	}{
		{"openai shaped", 400, `{"error":{"message":"` + secret + `","type":"x","param":"` + secret + `","code":400}}`, 400},
		{"plain page", 500, "<html>" + secret + strings.Repeat("x", 100<<10) + "</html>", 500},
		{"not an error status", 302, secret, 502},
		{"invalid utf-8", 403, secret + "\xff\xfe", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			_, err := OpenEngineStream(t.Context(), srv.Client(), srv.URL, "req_1", []byte(`{}`))
			var e *dispatch.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *dispatch.Error", err)
			}
			body := string(e.Body.Marshal())
			if e.Status != tt.want || strings.Contains(body, secret) || strings.Contains(err.Error(), secret) {
				t.Errorf("client sees %d %s (%v), want %d without the upstream's words", e.Status, body, err, tt.want)
			}
			if !strings.Contains(e.Upstream, secret) || len(e.Upstream) > MaxUpstreamLog+3 || !utf8.ValidString(e.Upstream) {
				t.Errorf("upstream kept for the log = %d bytes, want the secret within %d bytes of valid UTF-8", len(e.Upstream), MaxUpstreamLog)
			}
		})
	}
}

func TestDirectUnreachableEngineIsNoCapacity(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	d := NewDirect(map[string][]Target{"m": {{URL: url, ServedName: "m"}}}, nil)
	_, err := d.Dispatch(context.Background(), job("m", true))
	if !errors.Is(err, dispatch.ErrNoCapacity) {
		t.Errorf("err = %v, want dispatch.ErrNoCapacity", err)
	}
}

func TestBrokenStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		// The engine dies: the body ends without [DONE].
	}))
	defer srv.Close()
	d := NewDirect(map[string][]Target{"m": {{URL: srv.URL, ServedName: "m"}}}, srv.Client())
	s, err := d.Dispatch(context.Background(), job("m", true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	events, end := drain(t, s)
	if len(events) != 1 || events[0].Tokens != 1 {
		t.Errorf("events = %d (tokens %d), want 1 content event", len(events), events[0].Tokens)
	}
	if !errors.Is(end, dispatch.ErrStreamBroken) {
		t.Errorf("end = %v, want dispatch.ErrStreamBroken", end)
	}
}

// hangingEngine sends one content chunk, then holds the stream until the
// request's context ends, which closes aborted.
func hangingEngine(t *testing.T) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	aborted := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(aborted)
	}))
	t.Cleanup(srv.Close)
	return srv, aborted
}

// TestCancelAbortsEngine shows that ending the context closes the engine's
// stream: the engine sees its request context end, as vLLM aborts.
func TestCancelAbortsEngine(t *testing.T) {
	srv, aborted := hangingEngine(t)
	d := NewDirect(map[string][]Target{"m": {{URL: srv.URL, ServedName: "m"}}}, srv.Client())
	checkCancelAborts(t, d, aborted)
}

// checkCancelAborts starts a job on d over a hangingEngine, reads its
// first event, cancels the job's context and checks that the engine saw
// its request end and that the stream ends too.
func checkCancelAborts(t *testing.T, d dispatch.Dispatcher, aborted <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := d.Dispatch(ctx, job("m", true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("engine request not aborted after cancel")
	}
	if _, err := s.Recv(); err == nil {
		t.Error("Recv after cancel returned no error")
	}
}

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		tokens    int64
		wantUsage bool
		wantErr   bool
	}{
		{name: "role chunk", data: `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`},
		{name: "content", data: `{"choices":[{"index":0,"delta":{"content":"hi"}}]}`, tokens: 1},
		{name: "usage", data: `{"choices":[],"usage":{"prompt_tokens":1,"total_tokens":3,"completion_tokens":2}}`, wantUsage: true},
		{name: "continuous usage is content", data: `{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":1,"total_tokens":2,"completion_tokens":1}}`, tokens: 1},
		{name: "usage null", data: `{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}`, tokens: 1},
		{name: "error", data: `{"error":{"message":"x","type":"InternalServerError","param":null,"code":500}}`, wantErr: true},
		{name: "text mentioning error", data: `{"choices":[{"index":0,"delta":{"content":"\"error\""}}]}`, tokens: 1},
		{name: "role chunk without content", data: `{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`},
		{name: "finish chunk", data: `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`},
		{name: "finish chunk with null content", data: `{"choices":[{"index":0,"delta":{"content":null},"finish_reason":"tool_calls"}]}`},
		{name: "tool call start", data: `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`, tokens: 1},
		{name: "tool call arguments", data: `{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`, tokens: 1},
		{name: "reasoning content", data: `{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}`, tokens: 1},
		{name: "reasoning", data: `{"choices":[{"index":0,"delta":{"reasoning":"think"}}]}`, tokens: 1},
		{name: "refusal", data: `{"choices":[{"index":0,"delta":{"refusal":"no"}}]}`, tokens: 1},
		{name: "empty reasoning", data: `{"choices":[{"index":0,"delta":{"reasoning_content":""}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := ParseEvent([]byte(tt.data))
			if ev.Tokens != tt.tokens || (ev.Usage != nil) != tt.wantUsage || (ev.Err != nil) != tt.wantErr {
				t.Errorf("got tokens=%d usage=%v err=%v; want %d %v %v", ev.Tokens, ev.Usage != nil, ev.Err != nil, tt.tokens, tt.wantUsage, tt.wantErr)
			}
		})
	}
}

func TestDirectCapsInFlight(t *testing.T) {
	srv := goldenEngine(t, "stream_no_usage.golden", nil)
	d := NewDirect(map[string][]Target{"m": {{URL: srv.URL, ServedName: "m", MaxInFlight: 1}}}, srv.Client())
	s1, err := d.Dispatch(context.Background(), job("m", true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dispatch(context.Background(), job("m", true)); !errors.Is(err, dispatch.ErrNoCapacity) {
		t.Fatalf("second dispatch: err = %v, want dispatch.ErrNoCapacity while the first runs", err)
	}
	s1.Close()
	s1.Close() // a second Close must not free a second place
	s2, err := d.Dispatch(context.Background(), job("m", true))
	if err != nil {
		t.Fatalf("dispatch after close: %v", err)
	}
	if _, err := d.Dispatch(context.Background(), job("m", true)); !errors.Is(err, dispatch.ErrNoCapacity) {
		t.Fatalf("double Close freed two places: err = %v", err)
	}
	s2.Close()
}

// TestDirectReusesConnections: a stream read to its [DONE] leaves its
// connection to the engine in the pool, so sequential requests share one.
func TestDirectReusesConnections(t *testing.T) {
	// The body's end comes a moment after [DONE], as from an engine whose
	// handler returns after its last write.
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(5 * time.Millisecond)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	d := NewDirect(map[string][]Target{"m": {{URL: srv.URL, ServedName: "m"}}}, nil)
	defer d.CloseIdleConnections()
	for range 5 {
		s, err := d.Dispatch(t.Context(), job("m", true))
		if err != nil {
			t.Fatal(err)
		}
		if _, end := drain(t, s); !errors.Is(end, io.EOF) {
			t.Fatalf("end = %v", end)
		}
		s.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 requests opened %d connections, want 1", n)
	}
}

// TestDoneWithBodyHeldOpen: an engine that sends [DONE] but keeps its body
// open does not hold the stream: the drain gives up after drainWait.
func TestDoneWithBodyHeldOpen(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	d := NewDirect(map[string][]Target{"m": {{URL: srv.URL, ServedName: "m"}}}, nil)
	s, err := d.Dispatch(t.Context(), job("m", true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	if _, end := drain(t, s); !errors.Is(end, io.EOF) {
		t.Errorf("end = %v, want io.EOF", end)
	}
	if took := time.Since(start); took > drainWait+time.Second {
		t.Errorf("Recv took %v after [DONE]", took)
	}
}
