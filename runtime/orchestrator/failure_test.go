package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// inFlight is how many requests an engine holds now.
func inFlight(n *node) int {
	st := n.sim.Stats()
	return st.Running + st.Waiting
}

// seen is how many requests an engine has taken in all.
func seen(n *node) int64 {
	st := n.sim.Stats()
	return int64(st.Running+st.Waiting) + st.Finished + st.Aborted
}

// TestSocketCut cuts a node's socket with a request streaming on it and
// one not yet streamed, keeps the link down for a while, then lets it
// back: the streaming request breaks, the other one completes on another
// node, nothing goes to the dead node, and the node comes back under a
// new epoch.
func TestSocketCut(t *testing.T) {
	c := newCluster(t)
	b := c.startReplica("orch-b", nil)
	p := newCutProxy(t, b)
	n1 := c.startNode("node-1", b, nodeOpts{serverURL: p.wsURL(), sim: enginesim.Config{TimeScale: 2}})
	first := c.waitNode(n1.id, "orch-b")

	streaming, err := b.o().Dispatch(t.Context(), job("streaming", 2000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := streaming.Recv(); err != nil {
		t.Fatal(err)
	}
	n1.sim.SetFaults(enginesim.Faults{Hang: true})
	pending := make(chan result, 1)
	go func() {
		st, err := b.o().Dispatch(t.Context(), job("pending", 50))
		if err != nil {
			pending <- result{err: err}
			return
		}
		pending <- drain(st)
	}()
	testenv.Eventually(c.t, "the second request hangs on node-1, with nothing streamed", func() bool { return n1.sim.Stats().Hung == 1 })

	n2 := c.startNode("node-2", b, nodeOpts{})
	c.waitNode(n2.id, "orch-b")

	p.block(true)
	p.cut()
	got := drain(streaming)
	if !errors.Is(got.err, dispatch.ErrStreamBroken) {
		t.Errorf("streaming request ended with %v, want ErrStreamBroken", got.err)
	}
	if got.tokens == 0 {
		t.Errorf("streaming request relayed no tokens before the cut")
	}
	select {
	case r := <-pending:
		if !r.complete() {
			t.Errorf("not-yet-streamed request ended with %v; want it completed on node-2", r.err)
		}
		if seen(n2) == 0 {
			t.Errorf("node-2 never got the retried request")
		}
	case <-time.After(testenv.WaitFor):
		t.Fatal("not-yet-streamed request hangs after the cut")
	}

	testenv.Eventually(c.t, "node-1 leaves the registry", func() bool {
		_, err := c.reg.Get(t.Context(), n1.id)
		return errors.Is(err, registry.ErrNotFound)
	})
	n1.sim.SetFaults(enginesim.Faults{})
	testenv.Eventually(c.t, "node-1's engine let its requests go", func() bool { return inFlight(n1) == 0 })
	before := seen(n1)
	for i := range 5 {
		st, err := b.o().Dispatch(t.Context(), job(fmt.Sprintf("while-dead-%d", i), 20))
		if err != nil {
			t.Fatalf("request while node-1 is dead: %v", err)
		}
		if r := drain(st); !r.complete() {
			t.Fatalf("request while node-1 is dead ended with %v", r.err)
		}
	}
	if after := seen(n1); after != before {
		t.Errorf("node-1's engine got %d requests while its socket was down", after-before)
	}

	p.block(false)
	back := c.waitNode(n1.id, "orch-b")
	if back.Epoch <= first.Epoch {
		t.Errorf("node-1 came back under epoch %d, want more than %d", back.Epoch, first.Epoch)
	}
	if p.dialed() < 2 {
		t.Errorf("proxy saw %d links, want a reconnect", p.dialed())
	}
}

// TestEngineKilledMidStream kills the engine while it streams: the
// consumer gets the engine's error event and the end of the stream without
// usage, as from vLLM directly, never a hang.
func TestEngineKilledMidStream(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	n := c.startNode("node-1", b, nodeOpts{sim: enginesim.Config{TimeScale: 5, Faults: enginesim.Faults{DieAfterTokens: 30}}})
	c.waitNode(n.id, "orch-b")

	st, err := a.o().Dispatch(t.Context(), job("doomed", 400))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() { done <- drain(st) }()
	select {
	case r := <-done:
		if r.usage != nil {
			t.Errorf("stream ended with usage %+v after the engine died", r.usage)
		}
		if r.errEv == nil {
			t.Errorf("no error event before the break")
		}
		if r.tokens == 0 || r.tokens > 30 {
			t.Errorf("relayed %d tokens before the engine died after 30", r.tokens)
		}
	case <-time.After(testenv.WaitFor):
		t.Fatal("the stream hangs after the engine died")
	}
}

// TestRequestContextEndsStream cancels a request's context mid-stream:
// Recv returns at once, without the chunks still coming, and the node
// aborts the request on its engine.
func TestRequestContextEndsStream(t *testing.T) {
	c := newCluster(t)
	b := c.startReplica("orch-b", nil)
	n := c.startNode("node-1", b, nodeOpts{sim: enginesim.Config{TimeScale: 2}})
	c.waitNode(n.id, "orch-b")
	ctx, cancel := context.WithCancel(t.Context())
	st, err := b.o().Dispatch(ctx, job("abandoned", 2000))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := st.Recv(); !errors.Is(err, dispatch.ErrStreamBroken) || !errors.Is(err, context.Canceled) {
		t.Errorf("Recv after the context ended = %v, want a broken stream caused by the cancel", err)
	}
	st.Close()
	testenv.Eventually(c.t, "the engine aborts the request", func() bool { return n.sim.Stats().Aborted == 1 })
}

// TestSlowConsumerHoldsOnlyItsStream reads nothing of one stream while
// another on the same node and socket, forwarded through another
// replica, streams to its end: the window holds back the slow one alone.
func TestSlowConsumerHoldsOnlyItsStream(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	n := c.startNode("node-1", b, nodeOpts{})
	c.waitNode(n.id, "orch-b")

	for _, r := range []*replica{b, a} {
		t.Run(r.id, func(t *testing.T) {
			slow, err := r.o().Dispatch(t.Context(), job("slow-"+r.id, 1000))
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			fast, err := r.o().Dispatch(t.Context(), job("fast-"+r.id, 300))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan result, 1)
			go func() { done <- drain(fast) }()
			select {
			case got := <-done:
				if !got.complete() {
					t.Fatalf("the fast stream ended with %v", got.err)
				}
			case <-time.After(testenv.WaitFor):
				t.Fatal("the fast stream stalls behind the slow one")
			}
			// The slow stream is intact: it resumes where it stopped.
			if got := drain(slow); !got.complete() {
				t.Errorf("the slow stream ended with %v after its consumer came back", got.err)
			}
		})
	}
}

// TestLostRequestRetriedOnce: a request lost before its first event with
// no other node to retry on ends with a 503 and Retry-After, not
// ErrNoCapacity: that would queue it at the gateway and dispatch it again,
// a second retry docs/requirements.md does not allow.
func TestLostRequestRetriedOnce(t *testing.T) {
	c := newCluster(t)
	b := c.startReplica("orch-b", nil)
	p := newCutProxy(t, b)
	n1 := c.startNode("node-1", b, nodeOpts{serverURL: p.wsURL(), sim: enginesim.Config{Faults: enginesim.Faults{Hang: true}}})
	c.waitNode(n1.id, "orch-b")
	pending := make(chan error, 1)
	go func() {
		st, err := b.o().Dispatch(t.Context(), job("lost", 50))
		if err == nil {
			st.Close()
		}
		pending <- err
	}()
	testenv.Eventually(c.t, "the request hangs on node-1, with nothing streamed", func() bool { return n1.sim.Stats().Hung == 1 })
	p.block(true)
	p.cut()
	select {
	case err := <-pending:
		var de *dispatch.Error
		if errors.Is(err, dispatch.ErrNoCapacity) || !errors.As(err, &de) || de.Status != 503 || de.RetryAfter <= 0 {
			t.Errorf("Dispatch = %v; want a 503 dispatch.Error with Retry-After, not ErrNoCapacity", err)
		}
	case <-time.After(testenv.WaitFor):
		t.Fatal("the lost request hangs")
	}
}
