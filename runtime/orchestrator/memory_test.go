package orchestrator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// idleNodes is how many idle node sockets BenchmarkIdleNodeMemory holds.
const idleNodes = 1000

// idleAgentsEnv carries the child process's idleAgentsConfig.
const idleAgentsEnv = "LLMPLAT_IDLE_AGENTS"

// idleAgentsConfig is what the child needs: where to dial, and a node id
// and token per agent.
type idleAgentsConfig struct {
	ServerURL string
	Nodes     map[string]string // node id → token
}

// BenchmarkIdleNodeMemory measures what an idle node socket costs the
// orchestrator: a child process runs idleNodes node agents (their memory
// is not counted here) that register and stay idle, beating; the replica's
// heap and goroutine stacks are read before and after, each after a full
// collection. Reported per node: bytes and goroutines. With
// LLMPLAT_HEAP_PROFILE set it writes a heap profile there while connected.
func BenchmarkIdleNodeMemory(b *testing.B) {
	for range b.N {
		c := newCluster(b)
		r := c.startReplica("orch-mem", func(cfg *orchestrator.Config) { cfg.RegistrationsPerSecond = 5000 })
		cfg := idleAgentsConfig{ServerURL: r.wsURL(), Nodes: map[string]string{}}
		for i := range idleNodes {
			id := fmt.Sprintf("idle-%04d", i)
			issued, err := c.tokens.Issue(b.Context(), id, "issue-"+id, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			cfg.Nodes[id] = issued.Token
		}
		before, gBefore := testenv.LiveBytes()
		testenv.StartChild(b, idleAgentsEnv, cfg)
		testenv.Eventually(c.t, fmt.Sprintf("%d idle nodes registered", idleNodes), func() bool {
			nodes, err := c.reg.List(b.Context())
			return err == nil && len(nodes) == idleNodes
		})
		time.Sleep(2 * nodeproto.HeartbeatInterval) // beats and pings: the steady state
		after, gAfter := testenv.LiveBytes()
		if path := os.Getenv("LLMPLAT_HEAP_PROFILE"); path != "" {
			if f, err := os.Create(path); err == nil {
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
		b.ReportMetric(float64(after-before)/idleNodes, "bytes/idle-node")
		b.ReportMetric(float64(gAfter-gBefore)/idleNodes, "goroutines/idle-node")
	}
	b.ReportMetric(0, "ns/op")
}

// idleAgentsMain is the child process of BenchmarkIdleNodeMemory: an
// engine and one agent per node, idle, until stdin closes.
func idleAgentsMain(raw string) int {
	var cfg idleAgentsConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "idle agents: config:", err)
		return 2
	}
	sim, err := enginesim.New(enginesim.Config{TimeScale: 20, ServedModelName: "shared"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "idle agents:", err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "idle agents:", err)
		return 1
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes stdin: stop
		stop()
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = sim.Serve(ctx, ln) }()
	for id, token := range cfg.Nodes {
		a, err := nodeagent.New(nodeagent.Config{ServerURL: cfg.ServerURL, NodeID: id, Token: nodeproto.Secret(token),
			EngineURL: "http://" + ln.Addr().String(), Logger: slog.New(slog.DiscardHandler),
			Models: []nodeproto.Model{{Name: testModel, ServedName: "shared", MaxNumSeqs: 64, MaxModelLen: 8192, KVCapacityTokens: 100000}}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "idle agents:", err)
			return 1
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = a.Run(ctx) }()
	}
	fmt.Println("ready")
	wg.Wait()
	return 0
}
