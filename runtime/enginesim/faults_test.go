package enginesim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
)

func setFaults(t *testing.T, url, body string) (int, Faults) {
	t.Helper()
	resp, err := http.Post(url+"/sim/faults", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var f Faults
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(&f); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, f
}

func getFaults(t *testing.T, url string) Faults {
	t.Helper()
	resp, err := http.Get(url + "/sim/faults")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var f Faults
	if err := json.NewDecoder(resp.Body).Decode(&f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestEngineDeathAndRevival kills the engine mid-stream with the
// die-after-tokens fault: the streams in flight end with an error event and
// [DONE], /health and new requests get 503, and clearing the faults over
// HTTP revives it.
func TestEngineDeathAndRevival(t *testing.T) {
	cfg := testConfig()
	s := newTestSim(t, cfg)
	srv := serve(t, s)
	if code, f := setFaults(t, srv.URL, `{"die_after_tokens": 4}`); code != 200 || f.DieAfterTokens != 4 || f.Dead {
		t.Fatalf("set faults: %d %+v", code, f)
	}
	var bodies []*bufio.Reader
	for _, q := range []string{"first", "second"} {
		resp := post(context.Background(), t, srv.URL, chatBody(t, s, q, map[string]any{"stream": true, "max_tokens": 50}))
		defer resp.Body.Close()
		bodies = append(bodies, bufio.NewReader(resp.Body))
	}
	testenv.Eventually(t, "two queued requests", func() bool { return s.Stats().Waiting == 2 })
	for range 4 {
		s.Step(context.Background())
	}
	for i, br := range bodies {
		rest, err := io.ReadAll(br)
		if err != nil {
			t.Fatal(err)
		}
		events := strings.Split(strings.TrimSuffix(string(rest), "\n\n"), "\n\n")
		if n := len(events); n < 3 || events[n-1] != "data: [DONE]" || openai.StreamError([]byte(strings.TrimPrefix(events[n-2], "data: "))) == nil {
			t.Errorf("stream %d does not end with an error event then [DONE]: %q", i, events)
		}
	}
	if got := health(t, srv.URL); got != 503 {
		t.Errorf("health after death = %d, want 503", got)
	}
	if !getFaults(t, srv.URL).Dead {
		t.Error("GET /sim/faults does not report the engine dead")
	}
	resp := post(context.Background(), t, srv.URL, chatBody(t, s, "third", map[string]any{"stream": true}))
	if e := errorOf(t, resp); resp.StatusCode != 503 || e.Type != "ServiceUnavailableError" {
		t.Errorf("request to a dead engine = %d %s, want 503 ServiceUnavailableError", resp.StatusCode, e.Type)
	}
	if st := s.Stats(); st.Running+st.Waiting != 0 || st.KVBlocksUsed != 0 {
		t.Errorf("a dead engine holds work: %+v", st)
	}

	if code, f := setFaults(t, srv.URL, `{}`); code != 200 || f.Dead {
		t.Fatalf("revive: %d %+v", code, f)
	}
	if got := health(t, srv.URL); got != 200 {
		t.Errorf("health after revival = %d, want 200", got)
	}
	done := make(chan completion, 1)
	go func() { done <- postCompletion(t, srv.URL, chatBody(t, s, "fourth", map[string]any{"max_tokens": 10})) }()
	testenv.Eventually(t, "the request to queue", func() bool { return s.Stats().Waiting == 1 })
	for {
		if _, ok := s.Step(context.Background()); !ok {
			break
		}
	}
	if c := <-done; c.Usage.CompletionTokens != 10 {
		t.Errorf("after revival the answer has %d tokens, want 10", c.Usage.CompletionTokens)
	}
}

// TestKillOverHTTP sets dead through /sim/faults while a request that is
// not streamed is running: it gets a 500.
func TestKillOverHTTP(t *testing.T) {
	s := newTestSim(t, testConfig())
	srv := serve(t, s)
	got := make(chan int, 1)
	go func() {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(chatBody(t, s, "hi", nil)))
		if err != nil {
			t.Error(err)
			got <- 0
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	testenv.Eventually(t, "the request to queue", func() bool { return s.Stats().Waiting == 1 })
	s.Step(context.Background())
	if code, f := setFaults(t, srv.URL, `{"dead": true}`); code != 200 || !f.Dead {
		t.Fatalf("kill: %d %+v", code, f)
	}
	if code := <-got; code != 500 {
		t.Errorf("running request of a killed engine = %d, want 500", code)
	}
}

func TestFaultValidation(t *testing.T) {
	s := newTestSim(t, testConfig())
	srv := serve(t, s)
	tests := []struct{ name, body string }{
		{"rate above one", `{"error_rate": 1.5}`},
		{"negative tokens", `{"die_after_tokens": -1}`},
		{"unknown field", `{"error_rat": 0.5}`},
		{"bad duration", `{"slow_start": "soon"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, _ := setFaults(t, srv.URL, tt.body); code != 400 {
				t.Errorf("status = %d, want 400", code)
			}
		})
	}
	if code, f := setFaults(t, srv.URL, `{"slow_start": "1.5s", "hang": true}`); code != 200 || time.Duration(f.SlowStart) != 1500*time.Millisecond || !f.Hang {
		t.Errorf("set = %d %+v", code, f)
	}
	if code, f := setFaults(t, srv.URL, `{"slow_start": 2}`); code != 200 || time.Duration(f.SlowStart) != 2*time.Second {
		t.Errorf("seconds as a number: %d %+v", code, f)
	}
}

func TestErrorRate(t *testing.T) {
	s := newTestSim(t, testConfig())
	srv := serve(t, s)
	setFaults(t, srv.URL, `{"error_rate": 1}`)
	resp := post(context.Background(), t, srv.URL, chatBody(t, s, "hi", map[string]any{"stream": true}))
	if e := errorOf(t, resp); resp.StatusCode != 500 || e.Type != "InternalServerError" || e.Status() != 500 {
		t.Errorf("with error rate 1: %d %+v, want 500 InternalServerError", resp.StatusCode, e)
	}
	setFaults(t, srv.URL, `{"error_rate": 0.5}`)
	failed := 0
	for range 200 {
		resp := post(context.Background(), t, srv.URL, chatBody(t, s, "hi", map[string]any{"model": "unknown-so-it-stops-early"}))
		resp.Body.Close()
		if resp.StatusCode == 500 {
			failed++
		}
	}
	// The error fault is drawn after validation, so refused requests
	// never draw: only accepted ones count.
	if failed != 0 {
		t.Errorf("%d refused requests drew the error fault", failed)
	}
	got := make(chan int, 200)
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			resp := post(ctx, t, srv.URL, chatBody(t, s, "hi", map[string]any{"stream": true}))
			got <- resp.StatusCode
			cancel() // accepted streams are aborted at once
			resp.Body.Close()
		}()
	}
	wg.Wait()
	close(got)
	for code := range got {
		if code == 500 {
			failed++
		}
	}
	if failed < 70 || failed > 130 {
		t.Errorf("%d of 200 requests failed at error rate 0.5", failed)
	}
	testenv.Eventually(t, "aborted streams to leave the engine", func() bool { st := s.Stats(); return st.Waiting+st.Running == 0 })
}

// TestHang: a hung request gets its headers and nothing else until the
// client gives up, and never reaches the engine.
func TestHang(t *testing.T) {
	cfg := testConfig()
	cfg.Faults = Faults{Hang: true}
	s := newTestSim(t, cfg)
	srv := serve(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	resp := post(ctx, t, srv.URL, chatBody(t, s, "hi", map[string]any{"stream": true}))
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d, want 200 (vLLM sends headers at once)", resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	if len(b) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("read %q, %v; want nothing until the client's deadline", b, err)
	}
	if st := s.Stats(); st.Waiting+st.Running != 0 {
		t.Errorf("a hung request reached the engine: %+v", st)
	}
}

// TestSlowStart: the slow-start delay shows in time to first token, in
// simulated time.
func TestSlowStart(t *testing.T) {
	cfg := testConfig()
	cfg.Faults = Faults{SlowStart: Duration(3 * time.Second)}
	s := newTestSim(t, cfg)
	srv := serve(t, s)
	done := make(chan completion, 1)
	go func() { done <- postCompletion(t, srv.URL, chatBody(t, s, "hi", map[string]any{"max_tokens": 2})) }()
	testenv.Eventually(t, "the request to queue", func() bool { return s.Stats().Waiting == 1 })
	for {
		if _, ok := s.Step(context.Background()); !ok {
			break
		}
	}
	<-done
	ttft := scrape(t, srv.URL, "vllm:time_to_first_token_seconds_sum{")
	if ttft < 3 || ttft > 3.5 {
		t.Errorf("time to first token = %vs, want the 3 s slow start plus one step", ttft)
	}
}

// TestStallAfterTokens: a stalled stream sends its first tokens, then
// nothing (no error, no [DONE]) until the client gives up, and the
// sequence leaves the engine when it does.
func TestStallAfterTokens(t *testing.T) {
	cfg := testConfig()
	cfg.Clock, cfg.TimeScale = nil, 50
	cfg.Faults = Faults{StallAfterTokens: 5}
	s := newTestSim(t, cfg)
	runEngine(t, s)
	srv := serve(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	resp := post(ctx, t, srv.URL, chatBody(t, s, "hi", map[string]any{"stream": true, "max_tokens": 200}))
	defer resp.Body.Close()
	r := openai.NewSSEReader(resp.Body)
	var content int
	for {
		data, err := r.Next()
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("stream ended with %v, want nothing more until the client's deadline", err)
			}
			break
		}
		if openai.IsDone(data) || openai.StreamError(data) != nil {
			t.Fatalf("a stalled stream sent %s", data)
		}
		if bytes.Contains(data, []byte(`"content":"`)) && !bytes.Contains(data, []byte(`"content":""`)) {
			content++
		}
	}
	if content == 0 || content > 5 {
		t.Errorf("%d content chunks before the stall, want 1 to 5 (5 tokens)", content)
	}
	testenv.Eventually(t, "the stalled sequence to leave the engine", func() bool { st := s.Stats(); return st.Waiting+st.Running == 0 })
}
