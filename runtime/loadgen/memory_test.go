package loadgen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
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
	var engineURL string
	platformURL, key := startPlatform(b, platformOpts{streamIdleTimeout: time.Hour}, func(wsURL, token string) {
		engineURL = startNodeProcess(b, nodeProcessConfig{ServerURL: wsURL, Token: token, MaxNumSeqs: 2 * heldStreams, StallAfterTokens: 1})
	})
	client := loadgen.NewClient()
	defer client.CloseIdleConnections()
	hold := func(t loadgen.Target) (live uint64, goroutines int) {
		b.Helper()
		h := loadgen.Hold(b.Context(), client, t, heldStreams, heldPrompt, 16)
		defer func() {
			h.Close()
			client.CloseIdleConnections()
		}()
		if h.Opened != heldStreams {
			b.Fatalf("%s: %d of %d streams opened, %d failed; first: %s", t.Name, h.Opened, heldStreams, h.Errors, h.FirstError)
		}
		return testenv.LiveBytes()
	}
	proxyURL := serveProxy(b, engineURL)
	base, baseG := testenv.LiveBytes()
	b.ResetTimer()
	direct, directG := hold(loadgen.Target{Name: "direct", URL: engineURL, Model: overheadModel})
	platform, platformG := hold(loadgen.Target{Name: "platform", URL: platformURL, Key: key, Model: overheadModel})
	// The proxy last: its transport keeps its upstream connections idle
	// after its streams, which would count against the platform.
	proxy, proxyG := hold(loadgen.Target{Name: "proxy", URL: proxyURL, Model: overheadModel})
	b.StopTimer()
	perStream := func(x, y uint64) float64 { return (float64(x) - float64(y)) / heldStreams }
	b.Logf("live: at rest %d KiB, %d direct streams %d KiB, proxied %d KiB, through the platform %d KiB; goroutines %d, %d, %d, %d",
		base>>10, heldStreams, direct>>10, proxy>>10, platform>>10, baseG, directG, proxyG, platformG)
	b.ReportMetric(perStream(proxy, direct)/1024, "proxy-KiB/stream")
	b.ReportMetric(float64(proxyG-directG)/heldStreams, "proxy-goroutines/stream")
	b.ReportMetric(perStream(platform, direct)/1024, "gateway+orchestrator-KiB/stream")
	b.ReportMetric(float64(platformG-directG)/heldStreams, "gateway+orchestrator-goroutines/stream")
	b.ReportMetric(perStream(direct, base)/1024, "client-KiB/stream")
	b.ReportMetric(0, "ns/op")
}

// nodeProcessEnv, when set to a JSON nodeProcessConfig, makes the test
// binary run a node (a simulated engine and its agent) instead of tests.
const nodeProcessEnv = "LOADGEN_TEST_NODE"

// nodeProcessConfig is what the child needs.
type nodeProcessConfig struct {
	ServerURL, Token string
	MaxNumSeqs       int
	StallAfterTokens int64
}

// nodeProcessMain serves a simulated engine, prints its address, and runs
// the node agent "bench-node" beside it until stdin closes.
func nodeProcessMain(raw string) int {
	var pc nodeProcessConfig
	if err := json.Unmarshal([]byte(raw), &pc); err != nil {
		fmt.Fprintln(os.Stderr, "node process: config:", err)
		return 2
	}
	// Fifty times real time: 2,000 prompts of the seed's size are prefilled
	// in seconds, not minutes.
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
	engineURL := "http://" + ln.Addr().String()
	agent, err := nodeagent.New(nodeagent.Config{ServerURL: pc.ServerURL, NodeID: "bench-node", Token: nodeproto.Secret(pc.Token),
		EngineURL: engineURL, Logger: slog.New(slog.DiscardHandler),
		Models: []nodeproto.Model{{Name: overheadModel, ServedName: sim.ServedModelName(), MaxNumSeqs: pc.MaxNumSeqs,
			MaxModelLen: int(sim.MaxModelLen()), KVCapacityTokens: 1 << 30}}}) // room for every held stream
	if err != nil {
		fmt.Fprintln(os.Stderr, "node process:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	served := make(chan error, 1)
	go func() { served <- sim.Serve(ctx, ln) }()
	ran := make(chan error, 1)
	go func() { ran <- agent.Run(ctx) }()
	if err := json.NewEncoder(os.Stdout).Encode(engineURL); err != nil {
		return 1
	}
	code := 0
	for _, ch := range []chan error{ran, served} {
		if err := <-ch; err != nil {
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
