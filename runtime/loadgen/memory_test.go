package loadgen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// heldStreams is the mission's 10× the seed's peak.
const heldStreams = 2000

// heldPrompt is about the seed's chat prompt: some 1,500 tokens, 6 KB.
var heldPrompt = strings.Repeat("Tell me about the sea. ", 260)

// BenchmarkStreamMemory holds 2,000 streams open at once, first straight
// to the engine, then through the platform, then through a bare
// httputil.ReverseProxy in this process, and reports what the proxy holds per
// open stream beside what one gateway and one orchestrator hold. The engine and its
// node agent run in a child process, so this process holds the client and,
// in the second phase, the gateway and the orchestrator: the live heap and
// goroutine stacks (after a full collection) with the platform's streams
// open, less the same with the direct streams open, is theirs. The engine
// stalls every stream after its first token (StallAfterTokens), so the
// streams stay open without tokens flowing; the node declares room for
// them all. Prompts are the seed's size, so a prompt kept for a stream's
// life shows. Every stream must open: the platform serves 2,000 at once
// without an error.
func BenchmarkStreamMemory(b *testing.B) {
	if os.Getenv("LLMPLAT_HEAP_PROFILE") != "" {
		runtime.MemProfileRate = 1 // every allocation, so the profile adds up
	}
	var engineURL string
	// The cloud node's engine, in a process of its own, serves the model
	// under another platform name, so that a stream's path is its model's.
	cloudURL := startNodeProcess(b, nodeProcessConfig{MaxNumSeqs: 2 * heldStreams, StallAfterTokens: 1})
	cloudClient := dispatch.NewEngineClient()
	platformURL, key := startPlatform(b, platformOpts{streamIdleTimeout: time.Hour, cloudClient: cloudClient,
		cloud: []orchestrator.CloudNode{{ID: "bench-cloud", URL: cloudURL, Models: []registry.ModelSlot{{
			Name: cloudModel, ServedName: overheadModel, MaxNumSeqs: 2 * heldStreams, MaxModelLen: enginesim.DefaultMaxModelLen,
			KVCapacityTokens: 1 << 30}}}}}, // room for every held stream
		func(wsURL, token string) {
			engineURL = startNodeProcess(b, nodeProcessConfig{ServerURL: wsURL, Token: token, MaxNumSeqs: 2 * heldStreams, StallAfterTokens: 1})
		})
	waitRoutable(b, platformURL, key, cloudModel)
	client := loadgen.NewClient()
	defer client.CloseIdleConnections()
	hold := func(t loadgen.Target) (uint64, int) { return holdStreams(b, client, t, heldStreams, heldPrompt) }
	proxyURL := serveProxy(b, engineURL)
	base, baseG := testenv.LiveBytes()
	b.ResetTimer()
	direct, directG := hold(loadgen.Target{Name: "direct", URL: engineURL, Model: overheadModel})
	platform, platformG := hold(loadgen.Target{Name: "platform", URL: platformURL, Key: key, Model: overheadModel})
	cloud, cloudG := hold(loadgen.Target{Name: "platform-cloud", URL: platformURL, Key: key, Model: cloudModel})
	// The orchestrator keeps some of its engine connections idle after the
	// cloud streams; the proxy comes last, as its transport does the same.
	cloudClient.CloseIdleConnections()
	proxy, proxyG := hold(loadgen.Target{Name: "proxy", URL: proxyURL, Model: overheadModel})
	b.StopTimer()
	perStream := func(x, y uint64) float64 { return (float64(x) - float64(y)) / heldStreams }
	b.Logf("live: at rest %d KiB, %d direct streams %d KiB, proxied %d KiB, through the platform to the node %d KiB, to the cloud node %d KiB; goroutines %d, %d, %d, %d, %d",
		base>>10, heldStreams, direct>>10, proxy>>10, platform>>10, cloud>>10, baseG, directG, proxyG, platformG, cloudG)
	b.ReportMetric(perStream(proxy, direct)/1024, "proxy-KiB/stream")
	b.ReportMetric(float64(proxyG-directG)/heldStreams, "proxy-goroutines/stream")
	b.ReportMetric(perStream(platform, direct)/1024, "gateway+orchestrator-KiB/stream")
	b.ReportMetric(float64(platformG-directG)/heldStreams, "gateway+orchestrator-goroutines/stream")
	b.ReportMetric(perStream(cloud, direct)/1024, "cloud-path-KiB/stream")
	b.ReportMetric(float64(cloudG-directG)/heldStreams, "cloud-path-goroutines/stream")
	b.ReportMetric(perStream(direct, base)/1024, "client-KiB/stream")
	b.ReportMetric(0, "ns/op")
	// The mission's goals: 32 KiB on the node's socket path, and no more
	// than the bare proxy on the cloud path.
	if got := perStream(platform, direct) / 1024; got > 32 {
		b.Errorf("the platform holds %.1f KiB per open stream to a node; the goal is 32", got)
	}
	if perStream(cloud, direct) > perStream(proxy, direct) {
		b.Errorf("the platform holds %.1f KiB per open stream to a cloud node, more than the bare proxy's %.1f",
			perStream(cloud, direct)/1024, perStream(proxy, direct)/1024)
	}
}

// holdStreams opens n streams to t at once with prompt, fails the
// benchmark unless every one opens, and returns the live heap and stacks
// and the goroutines (after a full collection) while they are open. With
// LLMPLAT_HEAP_PROFILE set, the platform's phase writes a heap profile
// there, and its goroutines beside it.
func holdStreams(b *testing.B, client *http.Client, t loadgen.Target, n int, prompt string) (uint64, int) {
	b.Helper()
	h := loadgen.Hold(b.Context(), client, t, n, prompt, 16)
	defer func() {
		h.Close()
		client.CloseIdleConnections()
	}()
	if h.Opened != n {
		b.Fatalf("%s: %d of %d streams opened, %d failed; first: %s", t.Name, h.Opened, n, h.Errors, h.FirstError)
	}
	live, goroutines := testenv.LiveBytes()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.Logf("%s: %d streams open; heap %d KiB, goroutine stacks %d KiB", t.Name, n, ms.HeapAlloc>>10, ms.StackInuse>>10)
	if path := os.Getenv("LLMPLAT_HEAP_PROFILE"); path != "" && t.Name == "platform" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
		if f, err := os.Create(path + ".goroutines"); err == nil {
			_ = pprof.Lookup("goroutine").WriteTo(f, 1)
			f.Close()
		}
	}
	return live, goroutines
}

// manyStreams is what BenchmarkTenThousandStreams holds open at once.
const manyStreams = 10_000

// BenchmarkTenThousandStreams holds 10,000 streams open at once through
// one gateway and one orchestrator to one node, and fails on any stream
// that does not open. Each stream holds a descriptor in the client, the
// gateway, the node agent and the engine; a process here may open 20,000
// and may not raise that, so each of the four runs in a process of its
// own: this one runs the gateway and the orchestrator, and its live heap
// and stacks with the streams open, less at rest, is theirs. Prompts are
// short: the engine's KV cache must hold every stream.
func BenchmarkTenThousandStreams(b *testing.B) {
	engineURL := startNodeProcess(b, nodeProcessConfig{MaxNumSeqs: 2 * manyStreams, StallAfterTokens: 1})
	platformURL, key := startPlatform(b, platformOpts{streamIdleTimeout: time.Hour}, func(wsURL, token string) {
		startNodeProcess(b, nodeProcessConfig{ServerURL: wsURL, Token: token, EngineURL: engineURL, MaxNumSeqs: 2 * manyStreams})
	})
	base, baseG := testenv.LiveBytes()
	b.ResetTimer()
	line := testenv.StartChildWithin(b, clientProcessEnv, clientProcessConfig{
		Target: loadgen.Target{Name: "platform", URL: platformURL, Key: key, Model: overheadModel}, Streams: manyStreams, Prompt: "hi"},
		5*time.Minute)
	var held clientProcessResult
	if err := json.Unmarshal([]byte(line), &held); err != nil {
		b.Fatalf("client process said %q: %v", line, err)
	}
	if held.Opened != manyStreams {
		b.Fatalf("%d of %d streams opened, %d failed; first: %s", held.Opened, manyStreams, held.Errors, held.FirstError)
	}
	live, g := testenv.LiveBytes()
	b.StopTimer()
	b.Logf("gateway and orchestrator: at rest %d KiB and %d goroutines, with %d streams open %d KiB and %d goroutines (opened in %.1f s)",
		base>>10, baseG, manyStreams, live>>10, g, held.Seconds)
	b.ReportMetric(float64(held.Opened), "streams-open")
	b.ReportMetric((float64(live)-float64(base))/manyStreams/1024, "gateway+orchestrator-KiB/stream")
	b.ReportMetric(float64(g-baseG)/manyStreams, "gateway+orchestrator-goroutines/stream")
	b.ReportMetric(0, "ns/op")
}

// clientProcessEnv, when set to a JSON clientProcessConfig, makes the test
// binary hold streams open (clientProcessMain) instead of running tests.
const clientProcessEnv = "LOADGEN_TEST_CLIENT"

// clientProcessConfig is what the client child needs.
type clientProcessConfig struct {
	Target  loadgen.Target
	Streams int
	Prompt  string
}

// clientProcessResult is the client child's line once its streams opened.
type clientProcessResult struct {
	Opened, Errors int
	FirstError     string
	Seconds        float64
}

// clientProcessMain opens the streams, prints a clientProcessResult, and
// holds them open until stdin closes.
func clientProcessMain(raw string) int {
	var cfg clientProcessConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "client process: config:", err)
		return 2
	}
	client := loadgen.NewClient()
	start := time.Now()
	h := loadgen.Hold(context.Background(), client, cfg.Target, cfg.Streams, cfg.Prompt, 16)
	res := clientProcessResult{Opened: h.Opened, Errors: h.Errors, FirstError: h.FirstError, Seconds: time.Since(start).Seconds()}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	h.Close()
	client.CloseIdleConnections()
	return 0
}

// cloudModel is the platform's name for the model the cloud node serves.
const cloudModel = "llama-8b-cloud"

// waitRoutable waits until the platform answers a one-token completion of
// model: the orchestrator has read the cloud node's load.
func waitRoutable(tb testing.TB, platformURL, key, model string) {
	tb.Helper()
	client := loadgen.NewClient()
	defer client.CloseIdleConnections()
	body := fmt.Sprintf(`{"model":%q,"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, model)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		req, err := http.NewRequestWithContext(tb.Context(), http.MethodPost, platformURL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			tb.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s is not served through the platform after 30 s (last: %v)", model, err)
		}
	}
}

// nodeProcessEnv, when set to a JSON nodeProcessConfig, makes the test
// binary run a node (a simulated engine and its agent) instead of tests.
const nodeProcessEnv = "LOADGEN_TEST_NODE"

// nodeProcessConfig is what the child needs.
type nodeProcessConfig struct {
	ServerURL, Token string
	// EngineURL, when set, runs only the agent, for the engine there.
	EngineURL        string
	MaxNumSeqs       int
	StallAfterTokens int64
}

// nodeProcessMain serves a simulated engine and runs the node agent
// "bench-node" beside it, or only one of the two (see nodeProcessConfig),
// prints the engine's address, and runs until stdin closes.
func nodeProcessMain(raw string) int {
	var pc nodeProcessConfig
	if err := json.Unmarshal([]byte(raw), &pc); err != nil {
		fmt.Fprintln(os.Stderr, "node process: config:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	var parts []func() error
	engineURL := pc.EngineURL
	if engineURL == "" {
		// Fifty times real time: 2,000 prompts of the seed's size are
		// prefilled in seconds, not minutes.
		sim, err := enginesim.New(enginesim.Config{ServedModelName: overheadModel, Seed: 1, MaxNumSeqs: pc.MaxNumSeqs, TimeScale: 50,
			Faults: enginesim.Faults{StallAfterTokens: pc.StallAfterTokens}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "node process:", err)
			return 1
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "node process:", err)
			return 1
		}
		engineURL = "http://" + ln.Addr().String()
		parts = append(parts, func() error { return sim.Serve(ctx, ln) })
	}
	if pc.ServerURL != "" { // else a cloud node: the engine alone, reached over HTTP
		agent, err := nodeagent.New(nodeagent.Config{ServerURL: pc.ServerURL, NodeID: "bench-node", Token: nodeproto.Secret(pc.Token),
			EngineURL: engineURL, Logger: slog.New(slog.DiscardHandler),
			Models: []nodeproto.Model{{Name: overheadModel, ServedName: overheadModel, MaxNumSeqs: pc.MaxNumSeqs,
				MaxModelLen: enginesim.DefaultMaxModelLen, KVCapacityTokens: 1 << 30}}}) // room for every held stream
		if err != nil {
			fmt.Fprintln(os.Stderr, "node process:", err)
			return 1
		}
		parts = append(parts, func() error { return agent.Run(ctx) })
	}
	done := make(chan error, len(parts))
	for _, run := range parts {
		go func() { done <- run() }()
	}
	if err := json.NewEncoder(os.Stdout).Encode(engineURL); err != nil {
		return 1
	}
	code := 0
	for range parts {
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "node process:", err)
			code = 1
		}
	}
	return code
}

// startNodeProcess runs a node in a child process until the test ends and
// returns its engine's URL.
func startNodeProcess(tb testing.TB, pc nodeProcessConfig) string {
	tb.Helper()
	line := testenv.StartChild(tb, nodeProcessEnv, pc)
	var engineURL string
	if err := json.Unmarshal([]byte(line), &engineURL); err != nil {
		tb.Fatalf("node process said %q: %v", line, err)
	}
	return engineURL
}
