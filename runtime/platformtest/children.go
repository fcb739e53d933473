package platformtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/hoptrace"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// A process here may hold 20,000 descriptors and may not raise that, and
// every open stream holds one in the client, the gateway, the node agent
// and the engine: tests of 10,000 streams run each of those but the
// gateway in a child process (testenv.StartChild). A test package that
// uses them calls Child from its TestMain.

// Environment variables that make the test binary run a child part
// instead of its tests.
const (
	nodeProcessEnv    = "LLMPLAT_TEST_NODE"
	clientProcessEnv  = "LLMPLAT_TEST_CLIENT"
	proxyProcessEnv   = "LLMPLAT_TEST_PROXY"
	loadgenProcessEnv = "LLMPLAT_TEST_LOADGEN"
	closedProcessEnv  = "LLMPLAT_TEST_CLOSEDLOOP"
)

// Child runs the child part the environment names, if any, and reports its
// exit code; ok is false in a process that is not a child. A test
// package's TestMain calls it first:
//
//	if code, ok := platformtest.Child(); ok {
//		os.Exit(code)
//	}
func Child() (code int, ok bool) {
	mains := []struct {
		env  string
		main func(string) int
	}{
		{nodeProcessEnv, nodeProcessMain},
		{clientProcessEnv, clientProcessMain},
		{proxyProcessEnv, proxyProcessMain},
		{loadgenProcessEnv, loadgenProcessMain},
		{closedProcessEnv, closedProcessMain},
	}
	for _, m := range mains {
		if raw := os.Getenv(m.env); raw != "" {
			code := m.main(raw)
			if err := hoptrace.WriteDump(); err != nil {
				fmt.Fprintln(os.Stderr, "hop trace:", err)
				code = max(code, 1)
			}
			return code, true
		}
	}
	return 0, false
}

// NodeProcess configures a node run in a child process.
type NodeProcess struct {
	// Model is the model the engine serves and the agent declares.
	Model string
	// ServerURL and Token are the orchestrator's node socket and the
	// node's token; without a ServerURL only the engine runs (a cloud node,
	// or the engine another child's agent uses).
	ServerURL, Token string
	// NodeID is the agent's node id.
	NodeID string
	// EngineURL, when set, runs only the agent, for the engine there.
	EngineURL        string
	MaxNumSeqs       int
	StallAfterTokens int64
	// RealTime runs the engine in real time (50 ms to a first token, 20
	// ms a token at low load); otherwise TimeScale times faster (zero:
	// fifty, so that thousands of prompts are prefilled in seconds).
	RealTime  bool
	TimeScale float64
	// TimeFirstTokens serves the engine behind a TimedEngine.
	TimeFirstTokens bool
}

// StartNodeProcess runs a node in a child process until the test ends and
// returns its engine's URL.
func StartNodeProcess(tb testing.TB, pc NodeProcess) string {
	tb.Helper()
	line := testenv.StartChild(tb, nodeProcessEnv, pc)
	var engineURL string
	if err := json.Unmarshal([]byte(line), &engineURL); err != nil {
		tb.Fatalf("node process said %q: %v", line, err)
	}
	return engineURL
}

// nodeProcessMain serves a simulated engine and runs a node agent beside
// it, or only one of the two (see NodeProcess), prints the engine's
// address, and runs until stdin closes.
func nodeProcessMain(raw string) int {
	var pc NodeProcess
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
		// Fifty times real time: 2,000 prompts of the reference workload's size are
		// prefilled in seconds, not minutes.
		scale := cmp.Or(pc.TimeScale, 50.0)
		if pc.RealTime {
			scale = 1
		}
		sim, err := enginesim.New(enginesim.Config{ServedModelName: pc.Model, Seed: 1, MaxNumSeqs: pc.MaxNumSeqs, TimeScale: scale,
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
		if pc.TimeFirstTokens {
			parts = append(parts, func() error { return serveTimed(ctx, sim, ln) })
		} else {
			parts = append(parts, func() error { return sim.Serve(ctx, ln) })
		}
	}
	if pc.ServerURL != "" {
		agent, err := nodeagent.New(nodeagent.Config{ServerURL: pc.ServerURL, NodeID: pc.NodeID, Token: nodeproto.Secret(pc.Token),
			EngineURL: engineURL, Logger: slog.New(slog.DiscardHandler),
			Models: []nodeproto.Model{{Name: pc.Model, ServedName: pc.Model, MaxNumSeqs: pc.MaxNumSeqs,
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

// ClientProcess configures a client child that holds streams open.
type ClientProcess struct {
	Target  loadgen.Target
	Streams int
	Prompt  string
	// MaxTokens is each stream's max_tokens (default 16).
	MaxTokens int
}

// ClientResult is what the client child reports once its streams opened.
type ClientResult struct {
	Opened, Errors int
	FirstError     string
	Seconds        float64
}

// StartClientProcess opens the streams from a child process, waiting up
// to ready for them, and returns its report and leave: leave ends the
// child, and with it every stream at once, as clients that go away do.
func StartClientProcess(tb testing.TB, cp ClientProcess, ready time.Duration) (ClientResult, func()) {
	tb.Helper()
	line, leave := testenv.StartStoppableChild(tb, clientProcessEnv, cp, ready)
	var res ClientResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		tb.Fatalf("client process said %q: %v", line, err)
	}
	return res, leave
}

// clientProcessMain opens the streams, prints a ClientResult, and holds
// them open until stdin closes.
func clientProcessMain(raw string) int {
	var cp ClientProcess
	if err := json.Unmarshal([]byte(raw), &cp); err != nil {
		fmt.Fprintln(os.Stderr, "client process: config:", err)
		return 2
	}
	client := loadgen.NewClient()
	start := time.Now()
	h := loadgen.Hold(context.Background(), client, cp.Target, cp.Streams, cp.Prompt, cmp.Or(cp.MaxTokens, 16))
	res := ClientResult{Opened: h.Opened, Errors: h.Errors, FirstError: h.FirstError, Seconds: time.Since(start).Seconds()}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	h.Close()
	client.CloseIdleConnections()
	return 0
}

// serveTimed runs sim behind a TimedEngine on ln until ctx ends.
func serveTimed(ctx context.Context, sim *enginesim.Sim, ln net.Listener) error {
	srv := &http.Server{Handler: NewTimedEngine(sim.Handler()), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	err := sim.Run(ctx)
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// StartProxyProcess runs Proxy to upstream in a child process until the
// test ends and returns its URL.
func StartProxyProcess(tb testing.TB, upstream string) string {
	tb.Helper()
	line := testenv.StartChild(tb, proxyProcessEnv, upstream)
	var proxyURL string
	if err := json.Unmarshal([]byte(line), &proxyURL); err != nil {
		tb.Fatalf("proxy process said %q: %v", line, err)
	}
	return proxyURL
}

// proxyProcessMain serves Proxy, prints its address, and runs until stdin
// closes.
func proxyProcessMain(raw string) int {
	var upstream string
	if err := json.Unmarshal([]byte(raw), &upstream); err != nil {
		fmt.Fprintln(os.Stderr, "proxy process: config:", err)
		return 2
	}
	u, err := url.Parse(upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxy process:", err)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxy process:", err)
		return 1
	}
	srv := &http.Server{Handler: Proxy(u), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	if err := json.NewEncoder(os.Stdout).Encode("http://" + ln.Addr().String()); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	return 0
}

// LoadgenRun configures a loadgen child: it sends Warm's arrivals, then
// Run's, and reports both (their Client fields are ignored: the child
// uses loadgen.NewClient for both).
type LoadgenRun struct {
	Warm, Run loadgen.Config
}

// LoadgenResult is what a loadgen child reports.
type LoadgenResult struct {
	Warm, Run []loadgen.Result
	Err       string
}

// RunLoadgenProcess sends lr's arrivals from a child process, whose
// scheduler, unlike this process's, has only the client's work, and
// returns the results once both runs ended.
func RunLoadgenProcess(tb testing.TB, lr LoadgenRun) LoadgenResult {
	tb.Helper()
	// The child prints once both runs ended: allow them and their
	// streams' ends.
	line, stop := testenv.StartStoppableChild(tb, loadgenProcessEnv, lr, lr.Warm.Duration+lr.Run.Duration+2*time.Minute)
	stop()
	var res LoadgenResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		tb.Fatalf("loadgen process said %.200q: %v", line, err)
	}
	if res.Err != "" {
		tb.Fatalf("loadgen process: %s", res.Err)
	}
	return res
}

// loadgenProcessMain runs the warm-up and the measured run, prints a
// LoadgenResult, and returns.
func loadgenProcessMain(raw string) int {
	var lr LoadgenRun
	if err := json.Unmarshal([]byte(raw), &lr); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen process: config:", err)
		return 2
	}
	client := loadgen.NewClient()
	defer client.CloseIdleConnections()
	var res LoadgenResult
	lr.Warm.Client, lr.Run.Client = client, client
	var err error
	if res.Warm, err = loadgen.Run(context.Background(), lr.Warm); err == nil {
		res.Run, err = loadgen.Run(context.Background(), lr.Run)
	}
	if err != nil {
		res.Err = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// ClosedLoopRun configures a closed-loop client child: it sends Warm's
// arrivals, then runs Run (their Client fields are ignored: the child uses
// loadgen.NewClient for both).
type ClosedLoopRun struct {
	Warm loadgen.Config
	Run  loadgen.ClosedLoopConfig
}

// ClosedLoopResult is what a closed-loop child reports.
type ClosedLoopResult struct {
	Warm []loadgen.Result
	Run  []loadgen.ClosedLoopResult
	Err  string
}

// RunClosedLoopProcess runs cr from a child process, whose scheduler and
// garbage collector have only the client's work, and returns its results
// once the run ended.
func RunClosedLoopProcess(tb testing.TB, cr ClosedLoopRun) ClosedLoopResult {
	tb.Helper()
	// The child prints once both runs ended: allow them and their
	// requests' ends.
	line, stop := testenv.StartStoppableChild(tb, closedProcessEnv, cr, cr.Warm.Duration+cr.Run.Duration+2*time.Minute)
	stop()
	var res ClosedLoopResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		tb.Fatalf("closed-loop process said %.200q: %v", line, err)
	}
	if res.Err != "" {
		tb.Fatalf("closed-loop process: %s", res.Err)
	}
	return res
}

// closedProcessMain runs the warm-up and the closed loop, prints a
// ClosedLoopResult, and returns.
func closedProcessMain(raw string) int {
	var cr ClosedLoopRun
	if err := json.Unmarshal([]byte(raw), &cr); err != nil {
		fmt.Fprintln(os.Stderr, "closed-loop process: config:", err)
		return 2
	}
	client := loadgen.NewClient()
	defer client.CloseIdleConnections()
	cr.Warm.Client, cr.Run.Client = client, client
	var res ClosedLoopResult
	var err error
	if res.Warm, err = loadgen.Run(context.Background(), cr.Warm); err == nil {
		res.Run = loadgen.ClosedLoop(context.Background(), cr.Run)
	} else {
		res.Err = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}
