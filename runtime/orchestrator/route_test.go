package orchestrator_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestDispatchLocalAndForwarded runs requests on a node whose socket
// replica B owns, from B itself and from replica A through pub/sub, and
// checks every stream completes with the engine's exact usage.
func TestDispatchLocalAndForwarded(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	n := c.startNode("node-1", b, nodeOpts{})
	c.waitNode(n.id, "orch-b")
	probe := 0
	testenv.Eventually(c.t, "both replicas route to the node", func() bool {
		ok := true
		for _, r := range []*replica{a, b} {
			probe++
			st, err := r.o().Dispatch(t.Context(), job(fmt.Sprintf("probe-%d", probe), 1))
			if err != nil {
				ok = false
				continue
			}
			drain(st)
		}
		return ok
	})
	testenv.Eventually(c.t, "engine finished the probes", func() bool { return n.sim.Stats().Running == 0 })
	before := n.sim.Stats().GenerationTokens
	var relayed int64

	for _, tc := range []struct {
		name string
		r    *replica
	}{{"local on the owner", b}, {"forwarded through pub/sub", a}} {
		t.Run(tc.name, func(t *testing.T) {
			const requests = 4
			results := make(chan result, requests)
			for i := range requests {
				go func() {
					st, err := tc.r.o().Dispatch(t.Context(), job(fmt.Sprintf("%s-%d", tc.r.id, i), 120))
					if err != nil {
						results <- result{err: err}
						return
					}
					results <- drain(st)
				}()
			}
			for range requests {
				r := <-results
				if !r.complete() {
					t.Fatalf("stream ended with %v, usage %v; want [DONE] with usage", r.err, r.usage)
				}
				if r.tokens < 1 {
					t.Errorf("no content relayed")
				}
				relayed += r.usage.CompletionTokens
				if r.usage.CompletionTokens > 120 || r.usage.CompletionTokens < 1 {
					t.Errorf("completion tokens %d outside 1..120", r.usage.CompletionTokens)
				}
			}
		})
	}
	if got := n.sim.Stats().GenerationTokens - before; got != relayed {
		t.Errorf("engine generated %d tokens, streams reported %d", got, relayed)
	}
}

// TestDispatchWithoutNodes answers ErrNoCapacity, so the gateway queues.
func TestDispatchWithoutNodes(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	_, err := a.o().Dispatch(t.Context(), job("r1", 10))
	if !errors.Is(err, dispatch.ErrNoCapacity) {
		t.Fatalf("Dispatch without nodes = %v, want ErrNoCapacity", err)
	}
}

// TestCompletionLog keeps each done frame's counts where the ledger
// sweeper finds them, and knows nothing of a request no node reported.
func TestCompletionLog(t *testing.T) {
	c := newCluster(t)
	b := c.startReplica("orch-b", nil)
	n := c.startNode("node-1", b, nodeOpts{})
	c.waitNode(n.id, "orch-b")
	st, err := b.o().Dispatch(t.Context(), job("logged", 50))
	if err != nil {
		t.Fatal(err)
	}
	r := drain(st)
	if !r.complete() {
		t.Fatalf("stream ended with %v", r.err)
	}
	log := orchestrator.NewCompletionLog(c.rdb, c.prefix)
	var got ledger.Usage
	testenv.Eventually(c.t, "the done is logged", func() bool {
		u, ok, err := log.Completion(t.Context(), "logged")
		got = u
		return err == nil && ok
	})
	if want := (ledger.Usage{PromptTokens: r.usage.PromptTokens, CompletionTokens: r.usage.CompletionTokens}); got != want {
		t.Errorf("logged %+v, want the stream's usage %+v", got, want)
	}
	if _, ok, err := log.Completion(t.Context(), "never-ran"); ok || err != nil {
		t.Errorf("Completion of an unknown request = %v, %v; want false, nil", ok, err)
	}
}

// TestCloudNode routes to an engine configured by its Service URL, which
// has no agent: the replica reads its load and sends requests over HTTP.
func TestCloudNode(t *testing.T) {
	c := newCluster(t)
	sim, url, _ := c.startSim("cloud-1", enginesim.Config{})
	a := c.startReplica("orch-a", func(cfg *orchestrator.Config) {
		cfg.CloudNodes = []orchestrator.CloudNode{{ID: "cloud-1", URL: url, Models: []registry.ModelSlot{{
			Name: testModel, ServedName: sim.ServedModelName(), MaxNumSeqs: 64, KVCapacityTokens: sim.Stats().KVBlocksTotal * 16}}}}
	})
	var st dispatch.Stream
	testenv.Eventually(c.t, "the cloud node is routable", func() bool {
		var err error
		st, err = a.o().Dispatch(t.Context(), job("cloud", 40))
		return err == nil
	})
	if r := drain(st); !r.complete() {
		t.Fatalf("stream from the cloud node ended with %v", r.err)
	}
	if got := sim.Stats().Finished; got != 1 {
		t.Errorf("cloud engine finished %d requests, want 1", got)
	}
}
