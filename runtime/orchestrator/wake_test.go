package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/coldstart"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestKubeWakeFromZero: a declared model whose Service has no ready
// endpoint is published at zero, with the load time its Service announces
// (expected-load=780); a caller refused then counts on the pending gauge
// while no replica is ready, and the gauge drops once an endpoint of the
// Service turns ready.
func TestKubeWakeFromZero(t *testing.T) {
	kc, board := wakeCluster(t)
	kc.startReplica("orch-a")
	o := kc.replicas[0].o()
	ctx := t.Context()
	const load = 780 * time.Second

	var retry time.Duration
	testenv.Eventually(kc.t, "the model published at zero", func() bool {
		r, zero, err := board.Refuse(ctx, testModel, "key:1")
		retry = r
		return err == nil && zero
	})
	if retry > load || retry < load-10*time.Second {
		t.Errorf("Retry-After %v at the start of the wake, want about the Service's %v", retry, load)
	}
	// The gauge holds the refused caller across several refreshes, not
	// only until the next one.
	for range 3 {
		if got := o.Pending(ctx)[testModel]; got != 1 {
			t.Fatalf("pending %d while no replica is ready, want the refused caller", got)
		}
		time.Sleep(orchestrator.RefreshInterval)
	}

	_, url, _ := kc.startSim("a", enginesim.Config{ServedModelName: "sim-engine"})
	kc.engineSlice("vllm-a", url, "gpu-1", true)
	testenv.Eventually(kc.t, "the gauge drops once a replica is ready", func() bool { return o.Pending(ctx)[testModel] == 0 })
	if _, zero, err := board.Refuse(ctx, testModel, "key:2"); err != nil || zero {
		t.Errorf("with a ready replica: at zero %v (%v), want false", zero, err)
	}
}

// TestKubeStartSaysNothingOfZero: a replica that has just started has not
// yet read its cloud nodes' load (here the engine behind a ready endpoint
// does not answer its scrape): it must not publish the model at zero, or
// every gateway would refuse a served model with a cold start's
// Retry-After each time the orchestrators restart.
func TestKubeStartSaysNothingOfZero(t *testing.T) {
	kc, board := wakeCluster(t)
	kc.engineSlice("vllm-a", "http://127.0.0.1:1", "gpu-1", true)
	kc.startReplica("orch-a")
	// Several refreshes, well inside the replica's first 15 s.
	for end := time.Now().Add(3 * orchestrator.RefreshInterval); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, zero, err := board.Refuse(t.Context(), testModel, "key:1"); err != nil || zero {
			t.Fatalf("a replica just started published the model at zero (%v)", err)
		}
	}
}

// wakeCluster is a cluster whose orchestrators publish to a cold-start
// record and declare testModel.
func wakeCluster(t *testing.T) (*kubeCluster, *coldstart.Board) {
	t.Helper()
	kc := newKubeCluster(t)
	board, err := coldstart.New(kc.rdb, kc.prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc.mod = func(cfg *orchestrator.Config) {
		cfg.ColdStarts = board
		cfg.Models = func(context.Context) ([]string, error) { return []string{testModel}, nil }
	}
	return kc, board
}
