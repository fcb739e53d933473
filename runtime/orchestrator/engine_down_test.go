package orchestrator_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
)

// TestDeadEngineLeavesRouting: an engine that dies behind a live agent is
// reported down by the agent's health probe; the node leaves routing on
// every replica, requests get ErrNoHealthyNode at once instead of waiting
// in the queue, the admin view says why, and the node comes back when its
// engine does. Both deaths: an engine answering 503 (vLLM's /health after
// the engine died) and an engine process gone (connection refused).
func TestDeadEngineLeavesRouting(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	dead := c.startNode("node-dead", b, nodeOpts{})
	gone := c.startNode("node-gone", b, nodeOpts{})
	c.waitNode(dead.id, "orch-b")
	c.waitNode(gone.id, "orch-b")

	dead.sim.SetFaults(enginesim.Faults{Dead: true})
	gone.stopSim()
	for _, n := range []*node{dead, gone} {
		c.waitSnapshots("the engine of "+n.id+" down", n.id, func(got registry.Node, ok bool) bool {
			return ok && got.EngineDown != "" && !got.Healthy(got.LastSeen)
		})
	}
	for _, r := range []*replica{a, b} {
		if _, err := r.o().Dispatch(t.Context(), job("while-down-"+r.id, 10)); !errors.Is(err, dispatch.ErrNoHealthyNode) {
			t.Errorf("dispatch on %s with every engine down = %v, want ErrNoHealthyNode", r.id, err)
		}
	}
	// Through the gateway: a 503 no_healthy_node with Retry-After, not a
	// wait in the model's queue.
	base, key := c.gatewayFor(a.o())
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+testModel+`","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"no_healthy_node"`) || resp.Header.Get("Retry-After") == "" {
		t.Errorf("gateway with every engine down: %d %s (Retry-After %q); want 503 no_healthy_node with Retry-After",
			resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	live, err := orchestrator.NewControl(c.reg, c.rdb, c.events, nil).Live(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{dead.id, gone.id} {
		if l := live[id]; l.Healthy || l.EngineDown == "" {
			t.Errorf("admin view of %s: %+v, want unhealthy with the reason", id, l)
		}
	}

	dead.sim.SetFaults(enginesim.Faults{})
	c.waitSnapshots("the engine of "+dead.id+" up again", dead.id, func(got registry.Node, ok bool) bool {
		return ok && got.EngineDown == ""
	})
	st, err := a.o().Dispatch(t.Context(), job("after-revival", 10))
	if err != nil {
		t.Fatalf("dispatch after the engine came back: %v", err)
	}
	if r := drain(st); !r.complete() {
		t.Errorf("request after the engine came back ended with %v", r.err)
	}
}
