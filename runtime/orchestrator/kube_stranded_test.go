package orchestrator_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmplat/llmplat/runtime/clusterwatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestKubeLastEngineHeldUntilAnotherIsReady: an engine on a disrupted Node
// that is its model's last ready one stays in routing (its pod's budget
// keeps it running through a drift or an expiry), and every replica
// reports it stranded for the autoscaler; once another engine of the model
// is ready on a Node that is not going, the leader drains it, and puts it
// back when that one goes while its pod still runs. Before,
// the leader drained it at the taint and the model served nothing until
// its pod had gone and another had loaded (the twin's AMI drift).
func TestKubeLastEngineHeldUntilAnotherIsReady(t *testing.T) {
	kc := newKubeCluster(t, "orch-a", "orch-b")
	simA, urlA, _ := kc.startSim("a", enginesim.Config{ServedModelName: "sim-engine"})
	_, urlB, _ := kc.startSim("b", enginesim.Config{ServedModelName: "sim-engine"})
	_, urlC, _ := kc.startSim("c", enginesim.Config{ServedModelName: "sim-engine"})
	kc.engineSlice("vllm-a", urlA, "gpu-1", true)
	kc.routable("vllm-a")
	leader := kc.leader()

	taint(t, kc, "gpu-1")
	// An unready engine on a Node tainted after a's is drained (it serves
	// nothing): once it is, the leader has seen a's taint too, as the
	// Nodes' watch delivers their changes in order.
	kc.engineSlice("vllm-b", urlB, "gpu-2", false)
	taint(t, kc, "gpu-2")
	testenv.Eventually(t, "the leader drains the unready vllm-b", func() bool {
		return slices.Contains(kc.drains[leader].get(), "vllm-b")
	})
	for id, l := range kc.drains {
		if slices.Contains(l.get(), "vllm-a") {
			t.Fatalf("replica %s drained vllm-a, the model's last ready engine, at its Node's taint", id)
		}
	}
	kc.waitSnapshots("vllm-a active", "vllm-a", func(n registry.Node, ok bool) bool {
		return ok && n.State == registry.StateActive
	})
	before := simA.Stats().Finished
	dispatchAll(t, kc.replicas[1], "held-", 3)
	if got := simA.Stats().Finished - before; got != 3 {
		t.Errorf("the held engine a finished %d of the 3 requests sent after its taint, want all", got)
	}
	kc.strandedIs(1)

	// A replica of the model ready on a Node that is not going: a may go.
	kc.engineSlice("vllm-c", urlC, "gpu-3", true)
	testenv.Eventually(t, "the leader drains vllm-a", func() bool {
		return slices.Contains(kc.drains[leader].get(), "vllm-a")
	})
	kc.waitSnapshots("vllm-a draining", "vllm-a", func(n registry.Node, ok bool) bool {
		return ok && n.State == registry.StateDraining
	})
	kc.strandedIs(0)

	// c goes unready (scaled in, crashed) while a's pod still runs: a is
	// the model's last ready engine again, and back in routing.
	kc.engineSlice("vllm-c", urlC, "gpu-3", false)
	kc.waitSnapshots("vllm-a active again", "vllm-a", func(n registry.Node, ok bool) bool {
		return ok && n.State == registry.StateActive
	})
	kc.strandedIs(1)
	before = simA.Stats().Finished
	dispatchAll(t, kc.replicas[0], "resumed-", 2)
	if got := simA.Stats().Finished - before; got != 2 {
		t.Errorf("the resumed engine a finished %d of the 2 requests sent after c went, want all", got)
	}
}

// strandedIs waits until every replica's controller reports want stranded
// replicas of the test model.
func (kc *kubeCluster) strandedIs(want float64) {
	kc.t.Helper()
	testenv.EventuallyNil(kc.t, testenv.WaitFor, fmt.Sprintf("%v stranded replicas reported", want), func() error {
		for id, c := range kc.ctrls {
			if got := strandedGauge(kc.t, c); got != want {
				return fmt.Errorf("replica %s reports %v", id, got)
			}
		}
		return nil
	})
}

// strandedGauge is the stranded-replica gauge c reports for the test
// model, or -1 when it reports none.
func strandedGauge(t testing.TB, c *clusterwatch.Controller) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "model" && l.GetValue() == testModel {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
