package orchestrator_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/orchestrator"
)

// TestRestartStorm restarts every replica at once with 500 node agents
// connected: registrations never pass the configured rate in any second
// of the Redis clock, and every node is back within 60 s.
func TestRestartStorm(t *testing.T) {
	const (
		agents = 500
		rate   = 50
		backIn = 60 * time.Second
	)
	c := newCluster(t)
	limit := func(cfg *orchestrator.Config) { cfg.RegistrationsPerSecond = rate }
	replicas := []*replica{c.startReplica("orch-a", limit), c.startReplica("orch-b", limit)}

	sim, err := enginesim.New(enginesim.Config{TimeScale: 20, ServedModelName: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stopSim := context.WithCancel(context.Background())
	simDone := make(chan struct{})
	go func() {
		defer close(simDone)
		_ = sim.Serve(sctx, ln)
	}()
	actx, stopAgents := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		stopAgents()
		wg.Wait()
		stopSim()
		<-simDone
	})
	for i := range agents {
		id := fmt.Sprintf("storm-%03d", i)
		issued, err := c.tokens.Issue(t.Context(), id, "issue-"+id, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		a, err := nodeagent.New(nodeagent.Config{ServerURL: replicas[i%2].wsURL(), NodeID: id,
			Token: nodeproto.Secret(issued.Token), EngineURL: "http://" + ln.Addr().String(),
			Models: []nodeproto.Model{{Name: testModel, ServedName: "shared", MaxNumSeqs: 64, MaxModelLen: 8192, KVCapacityTokens: 100000}}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = a.Run(actx)
		}()
	}
	epochs := c.waitAll(agents, 2*backIn, nil)

	start := time.Now()
	var halts sync.WaitGroup
	for _, r := range replicas {
		halts.Add(1)
		go func() {
			defer halts.Done()
			r.halt()
		}()
	}
	halts.Wait()
	for _, r := range replicas {
		r.start()
	}
	c.waitAll(agents, backIn, epochs)
	took := time.Since(start)
	t.Logf("all %d nodes back %v after the restart of every replica", agents, took.Round(time.Millisecond))

	rows, err := c.db.QueryContext(t.Context(),
		"SELECT date_trunc('second', created_at) AS s, count(*) FROM node_events WHERE kind = 'register' GROUP BY s ORDER BY count(*) DESC LIMIT 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			sec time.Time
			n   int
		)
		if err := rows.Scan(&sec, &n); err != nil {
			t.Fatal(err)
		}
		t.Logf("busiest second %s: %d registrations (limit %d)", sec.Format(time.TimeOnly), n, rate)
		if n > rate {
			t.Errorf("%d registrations in the second %s, limit %d", n, sec.Format(time.TimeOnly), rate)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// waitAll waits until n nodes are registered and, when after is set, each
// under a newer epoch than in after; it returns their epochs.
func (c *cluster) waitAll(n int, within time.Duration, after map[string]int64) map[string]int64 {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		nodes, err := c.reg.List(c.t.Context())
		if err != nil {
			c.t.Fatal(err)
		}
		epochs := make(map[string]int64, len(nodes))
		for _, nd := range nodes {
			if old, ok := after[nd.ID]; after == nil || (ok && nd.Epoch > old) {
				epochs[nd.ID] = nd.Epoch
			}
		}
		if len(epochs) == n {
			return epochs
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d of %d nodes registered after %v", len(epochs), n, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
