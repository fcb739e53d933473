package orchestrator_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestDrainingReplicaServesNodesWithHealthFailed: a replica told to stop
// (its context ends, as at SIGTERM) answers the node socket's /healthz 503
// at once, so the NLB's health check takes it out, but for its drain delay
// it keeps its nodes and registers a node that dials it then; only after
// the delay does it ask its nodes to reconnect elsewhere and stop (issue
// 43: the node socket had no drain, and a rollout refused the connections
// the NLB still sent it, the reconnecting nodes' among them).
func TestDrainingReplicaServesNodesWithHealthFailed(t *testing.T) {
	c := newCluster(t)
	clk := clocktesting.NewFakeClock(time.Now())
	const delay = 2 * time.Minute
	a := c.startReplica("orch-a", func(cfg *orchestrator.Config) { cfg.Clock, cfg.DrainDelay = clk, delay })
	// The pod as the NLB reaches it, by its own address: a terminating pod
	// leaves its Service (the replica's URL) but not the target group.
	pod := httptest.NewServer(a.o().Handler())
	t.Cleanup(func() { pod.CloseClientConnections(); pod.Close() })
	podWS := "ws" + strings.TrimPrefix(pod.URL, "http") + orchestrator.ConnectPath
	health := func() int {
		resp, err := http.Get(pod.URL + "/healthz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	owner := func(id string) string {
		n, err := c.reg.Get(t.Context(), id)
		if err != nil {
			return ""
		}
		return n.Owner
	}
	c.startNode("node-1", a, nodeOpts{serverURL: podWS})
	testenv.Eventually(t, "node-1 registered at orch-a", func() bool { return owner("node-1") == "orch-a" })
	if got := health(); got != http.StatusOK {
		t.Fatalf("healthz before the drain = %d, want 200", got)
	}

	halted := make(chan struct{})
	go func() { defer close(halted); a.halt() }()
	testenv.Eventually(t, "healthz answers 503 once the replica drains", func() bool { return health() == http.StatusServiceUnavailable })
	c.startNode("node-2", a, nodeOpts{serverURL: podWS})
	testenv.Eventually(t, "node-2, dialling the draining replica, registered there", func() bool { return owner("node-2") == "orch-a" })
	if got := owner("node-1"); got != "orch-a" {
		t.Errorf("node-1 owned by %q while orch-a drains, want orch-a (no reconnect before the delay)", got)
	}
	select {
	case <-halted:
		t.Fatal("the replica stopped before its drain delay")
	default:
	}
	clk.Step(delay)
	select {
	case <-halted:
	case <-time.After(orchestrator.ShutdownGrace + testenv.WaitFor):
		t.Fatal("the replica did not stop after its drain delay")
	}
	// Its nodes were asked to reconnect; the pod is gone.
	pod.CloseClientConnections()
	pod.Close()
}
