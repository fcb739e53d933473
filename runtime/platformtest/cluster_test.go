package platformtest_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// socketStatus is what the replica's address answers a plain GET of the
// node socket (no upgrade, no token).
func socketStatus(t *testing.T, r *platformtest.Replica) int {
	t.Helper()
	resp, err := http.Get(r.URL + orchestrator.ConnectPath)
	if err != nil {
		t.Fatal(err)
	}
	platformtest.Discard(resp)
	return resp.StatusCode
}

// TestReplicaRestartsUnderItsAddress: a halted replica refuses at its
// address and dispatches nothing, as a terminated pod; Start runs a new
// instance that answers at the same address.
func TestReplicaRestartsUnderItsAddress(t *testing.T) {
	c := platformtest.NewCluster(t)
	r := c.StartReplica("orch-1", nil)
	first := r.Orchestrator()
	if first == nil {
		t.Fatal("no instance after StartReplica")
	}
	served := socketStatus(t, r)
	if served == http.StatusServiceUnavailable {
		t.Fatalf("the running replica answered %d", served)
	}

	r.Halt()
	if got := r.Orchestrator(); got != nil {
		t.Errorf("instance after Halt: %p, want none", got)
	}
	if got := socketStatus(t, r); got != http.StatusServiceUnavailable {
		t.Errorf("halted replica answered %d, want %d", got, http.StatusServiceUnavailable)
	}
	job := &dispatch.Job{RequestID: "while-halted", Model: "m", Members: []byte(`,"messages":[]}`)}
	if _, err := r.Dispatch(t.Context(), job); !errors.Is(err, dispatch.ErrNoCapacity) {
		t.Errorf("dispatch to a halted replica: %v, want ErrNoCapacity", err)
	}
	r.Halt() // a second halt does nothing

	r.Start()
	if got := r.Orchestrator(); got == nil || got == first {
		t.Errorf("instance after Start: %p (first %p), want a new one", got, first)
	}
	if got := socketStatus(t, r); got != served {
		t.Errorf("restarted replica answered %d, want %d as before the halt", got, served)
	}
}
