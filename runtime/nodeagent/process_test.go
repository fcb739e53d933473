package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// simProcessEnv, when set to a JSON simProcessConfig, makes the test
// binary serve a simulator instead of running tests (see TestMain).
const simProcessEnv = "NODEAGENT_TEST_SIM"

// simProcessConfig is the part of enginesim.Config a child takes.
type simProcessConfig struct {
	TimeScale  float64
	Seed       int64
	MaxNumSeqs int
}

// simProcessInfo is the child's first line on stdout.
type simProcessInfo struct {
	Addr        string
	Served      string
	MaxModelLen int64
}

// simProcessMain serves a simulator on a loopback port, prints where, and
// runs until its stdin closes (the parent is done) or a signal comes.
func simProcessMain(raw string) int {
	var pc simProcessConfig
	if err := json.Unmarshal([]byte(raw), &pc); err != nil {
		fmt.Fprintln(os.Stderr, "sim process: config:", err)
		return 2
	}
	sim, err := enginesim.New(enginesim.Config{TimeScale: pc.TimeScale, Seed: pc.Seed, MaxNumSeqs: pc.MaxNumSeqs})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sim process:", err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "sim process:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	info := simProcessInfo{Addr: ln.Addr().String(), Served: sim.ServedModelName(), MaxModelLen: sim.MaxModelLen()}
	if err := json.NewEncoder(os.Stdout).Encode(info); err != nil {
		return 1
	}
	if err := sim.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, "sim process:", err)
		return 1
	}
	return 0
}

// startSimProcess runs a simulator in a child process (this test binary
// again) until the test ends.
func startSimProcess(t *testing.T, pc simProcessConfig) engine {
	t.Helper()
	line := testenv.StartChild(t, simProcessEnv, pc)
	var info simProcessInfo
	if err := json.Unmarshal([]byte(line), &info); err != nil {
		t.Fatalf("simulator process said %q: %v", line, err)
	}
	return engine{url: "http://" + info.Addr, served: info.Served, maxModelLen: info.MaxModelLen}
}

// scrapeRaw reads an engine's exposition and sums each metric's samples
// over their labels, parsed here without the agent's code.
func scrapeRaw(t *testing.T, baseURL string) map[string]float64 {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // no idle conns for goleak
	resp, err := client.Get(baseURL + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		} else {
			name, rest, _ = strings.Cut(line, " ")
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			t.Fatalf("scrape: line %q: %v", line, err)
		}
		out[name] += v
	}
	return out
}

// TestEngineInAnotherProcess runs the agent against a vLLM-format engine
// it shares no memory with: the simulator in a child process, reached
// only over HTTP, as vLLM beside a real agent.
func TestEngineInAnotherProcess(t *testing.T) {
	t.Run("stream", testProcessStream)
	t.Run("heartbeat at a steady state", testProcessHeartbeat)
}

// testProcessStream relays one request: chunks in seq order within the
// credit the server grants, and a done with the engine's own counts.
func testProcessStream(t *testing.T) {
	eng := startSimProcess(t, simProcessConfig{TimeScale: 10, Seed: 7})
	fs := newFakeServer(t, fakeOpts{window: 8}) // grants as it reads, like the orchestrator
	startAgent(t, fs, eng)
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-p1", testModel, eng.served, 60))
	var seq int64
	var usage *openai.Usage
	var done *nodeproto.Done
	for done == nil {
		switch f := sc.next(t).(type) {
		case *nodeproto.Chunk:
			if got, want := f.Seq, seq; got != want {
				t.Fatalf("chunk seq = %d, want %d", got, want)
			}
			seq++
			if ev := engineclient.ParseEvent(f.Delta); ev.Usage != nil {
				usage = ev.Usage
			}
		case *nodeproto.Done:
			done = f
		default:
			t.Fatalf("unexpected %s frame", f.Type())
		}
	}
	if usage == nil {
		t.Fatal("no usage chunk before done")
	}
	m := scrapeRaw(t, eng.url)
	tests := []struct {
		name      string
		got, want int64
	}{
		{"done completion_tokens vs usage chunk", done.CompletionTokens, usage.CompletionTokens},
		{"done prompt_tokens vs usage chunk", done.PromptTokens, usage.PromptTokens},
		{"done completion_tokens vs engine counter", done.CompletionTokens, int64(m["vllm:generation_tokens_total"])},
		{"done prompt_tokens vs engine counter", done.PromptTokens, int64(m["vllm:prompt_tokens_total"])},
		{"done completion_tokens vs max_tokens", done.CompletionTokens, 60},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, tt.got, tt.want)
		}
	}
	if got, want := done.FinishReason, openai.FinishLength; got != want {
		t.Errorf("done finish_reason = %q, want %q", got, want)
	}
	if seq <= 8 {
		t.Errorf("%d chunks: the stream never needed a grant past the window of 8", seq)
	}
}

// testProcessHeartbeat holds the engine still (a simulated step lasts
// hours, one sequence at a time) with one request running and two
// waiting, and checks a heartbeat against the engine's own /metrics.
func testProcessHeartbeat(t *testing.T) {
	eng := startSimProcess(t, simProcessConfig{TimeScale: 1e-6, Seed: 7, MaxNumSeqs: 1})
	fs := newFakeServer(t, fakeOpts{})
	startAgent(t, fs, eng)
	sc := fs.accept(t)
	for i := range 3 {
		sc.send(t, assignFrame(fmt.Sprintf("req-s%d", i), testModel, eng.served, 100))
	}
	testenv.Eventually(t, "engine reaches 1 running and 2 waiting", func() bool {
		m := scrapeRaw(t, eng.url)
		return m["vllm:num_requests_running"] == 1 && m["vllm:num_requests_waiting"] == 2
	})
	// A beat scraped before the steady state may still be on its way:
	// take the first one received a full interval (1 s) later.
	after := time.Now().Add(time.Second + 100*time.Millisecond)
	var hb *nodeproto.Heartbeat
	for hb == nil {
		f := sc.nextAny(t)
		if b, ok := f.(*nodeproto.Heartbeat); ok && time.Now().After(after) {
			hb = b
		}
	}
	m := scrapeRaw(t, eng.url)
	if got, want := hb.QueueDepth, int(m["vllm:num_requests_waiting"]); got != want {
		t.Errorf("heartbeat queue_depth = %d, engine /metrics %d", got, want)
	}
	if got, want := hb.Running, int(m["vllm:num_requests_running"]); got != want {
		t.Errorf("heartbeat running = %d, engine /metrics %d", got, want)
	}
	kv, ok := m["vllm:kv_cache_usage_perc"]
	switch {
	case !ok || kv <= 0:
		t.Errorf("engine kv_cache_usage_perc = %v: not the steady state this test needs", kv)
	case hb.KVCacheUsage == nil:
		t.Errorf("heartbeat kv_cache_usage absent, engine /metrics %v", kv)
	case *hb.KVCacheUsage != kv:
		t.Errorf("heartbeat kv_cache_usage = %v, engine /metrics %v", *hb.KVCacheUsage, kv)
	}
	if hb.GPUUtil != nil {
		t.Errorf("heartbeat gpu_util = %v, want absent", *hb.GPUUtil)
	}
}
