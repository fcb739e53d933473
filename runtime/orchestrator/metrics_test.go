package orchestrator_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// counterSum sums a metric family's samples whose labels include want.
func counterSum(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// TestMetrics counts registrations, routing decisions by path and nodes
// by state, and exports the pending gauge for every declared model.
func TestMetrics(t *testing.T) {
	c := newCluster(t)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a := c.startReplica("orch-a", func(cfg *orchestrator.Config) { cfg.Metrics = orchestrator.NewMetrics(regA) })
	b := c.startReplica("orch-b", func(cfg *orchestrator.Config) { cfg.Metrics = orchestrator.NewMetrics(regB) })
	n := c.startNode("node-1", b, nodeOpts{})
	c.waitNode(n.id, "orch-b")
	var served int64 // completion tokens the node's engine reported
	testenv.Eventually(c.t, "replica A routes to the node", func() bool {
		st, err := a.o().Dispatch(t.Context(), job("m-a", 5))
		if err != nil {
			return false
		}
		if r := drain(st); r.usage != nil {
			served += r.usage.CompletionTokens
		}
		return true
	})
	st, err := b.o().Dispatch(t.Context(), job("m-b", 5))
	if err != nil {
		t.Fatal(err)
	}
	last := drain(st)
	if !last.complete() {
		t.Fatalf("m-b ended %v without usage", last.err)
	}

	if got := counterSum(t, regB, "llmplat_orchestrator_registrations_total", map[string]string{"result": "accepted"}); got != 1 {
		t.Errorf("replica B accepted %v registrations, want 1", got)
	}
	if got := counterSum(t, regA, "llmplat_orchestrator_routing_decisions_total", map[string]string{"result": "remote", "policy": "kv-aware"}); got < 1 {
		t.Errorf("replica A made %v remote decisions, want at least 1", got)
	}
	if got := counterSum(t, regB, "llmplat_orchestrator_routing_decisions_total", map[string]string{"result": "local"}); got != 1 {
		t.Errorf("replica B made %v local decisions, want 1", got)
	}
	testenv.Eventually(c.t, "replica A counts the node active", func() bool {
		return counterSum(t, regA, "llmplat_orchestrator_nodes", map[string]string{"state": "active"}) == 1
	})
	// The on-prem node's tokens, for LedgerDrift, are counted once per
	// request by the replica that holds its socket, whoever routed it.
	served += last.usage.CompletionTokens
	testenv.Eventually(c.t, "replica B counts the on-prem node's completion tokens", func() bool {
		return counterSum(t, regB, "llmplat_orchestrator_onprem_completion_tokens_total", nil) == float64(served)
	})
	if got := counterSum(t, regA, "llmplat_orchestrator_onprem_completion_tokens_total", nil); got != 0 {
		t.Errorf("replica A counted %v on-prem tokens, want 0 (it holds no node socket)", got)
	}
	if got := counterSum(t, regA, "llmplat_model_pending_requests", map[string]string{"model": testModel}); got != 0 {
		t.Errorf("pending for %s = %v, want 0 with nothing waiting", testModel, got)
	}
}
