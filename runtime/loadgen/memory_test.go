package loadgen_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// heldStreams is the mission's 10× the reference workload's peak.
const heldStreams = 2000

// heldPrompt is about the reference workload's chat prompt: some 1,500 tokens, 6 KB.
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
// them all. Prompts are the reference workload's size, so a prompt kept for a stream's
// life shows. Every stream must open: the platform serves 2,000 at once
// without an error.
func BenchmarkStreamMemory(b *testing.B) {
	if os.Getenv("LLMPLAT_HEAP_PROFILE") != "" {
		runtime.MemProfileRate = 1 // every allocation, so the profile adds up
	}
	var engineURL string
	// The cloud node's engine, in a process of its own, serves the model
	// under another platform name, so that a stream's path is its model's.
	cloudURL := platformtest.StartNodeProcess(b, platformtest.NodeProcess{Model: overheadModel, MaxNumSeqs: 2 * heldStreams, StallAfterTokens: 1})
	cloudClient := engineclient.NewEngineClient()
	platformURL, key := startPlatform(b, platformOpts{streamIdleTimeout: time.Hour, cloudClient: cloudClient,
		cloud: []orchestrator.CloudNode{{ID: "bench-cloud", URL: cloudURL, Models: []registry.ModelSlot{{
			Name: cloudModel, ServedName: overheadModel, MaxNumSeqs: 2 * heldStreams, MaxModelLen: enginesim.DefaultMaxModelLen,
			KVCapacityTokens: 1 << 30}}}}}, // room for every held stream
		func(wsURL, token string) {
			engineURL = platformtest.StartNodeProcess(b, platformtest.NodeProcess{Model: overheadModel, NodeID: "bench-node", ServerURL: wsURL, Token: token, MaxNumSeqs: 2 * heldStreams, StallAfterTokens: 1})
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
	engineURL := platformtest.StartNodeProcess(b, platformtest.NodeProcess{Model: overheadModel, MaxNumSeqs: 2 * manyStreams, StallAfterTokens: 1})
	platformURL, key := startPlatform(b, platformOpts{streamIdleTimeout: time.Hour}, func(wsURL, token string) {
		platformtest.StartNodeProcess(b, platformtest.NodeProcess{Model: overheadModel, NodeID: "bench-node", ServerURL: wsURL, Token: token, EngineURL: engineURL, MaxNumSeqs: 2 * manyStreams})
	})
	base, baseG := testenv.LiveBytes()
	b.ResetTimer()
	held, _ := platformtest.StartClientProcess(b, platformtest.ClientProcess{
		Target: loadgen.Target{Name: "platform", URL: platformURL, Key: key, Model: overheadModel}, Streams: manyStreams, Prompt: "hi"},
		5*time.Minute)
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
