package orchestrator_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// heldVerifier is a token store whose rechecks, once armed, do not return
// until released: a database slower than any stream.
type heldVerifier struct {
	inner   orchestrator.TokenVerifier
	mu      sync.Mutex
	armed   bool
	entered chan struct{} // closed when an armed check starts
	release chan struct{}
	once    sync.Once
}

func (h *heldVerifier) Verify(ctx context.Context, nodeID, token string) error {
	h.mu.Lock()
	armed := h.armed
	h.mu.Unlock()
	if !armed {
		return h.inner.Verify(ctx, nodeID, token)
	}
	h.once.Do(func() { close(h.entered) })
	err := h.inner.Verify(ctx, nodeID, token)
	<-h.release
	return err
}

// TestFrozenDatabaseDoesNotStallANodesStream: PostgreSQL freezes while a
// node streams, and the periodic recheck of the node's token hangs on it;
// the stream still gets its flow-control windows and completes, because
// the recheck runs apart from the socket's writer.
func TestFrozenDatabaseDoesNotStallANodesStream(t *testing.T) {
	c := newCluster(t)
	u, err := url.Parse(c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's database, reached through a proxy the test can freeze.
	pgProxy := testenv.NewFaultProxy(t, u.Host)
	proxied, err := store.Open(t.Context(), c.dsnVia(pgProxy.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxied.Close() })
	tokens := &heldVerifier{inner: admin.NewSQLNodeTokens(proxied), entered: make(chan struct{}), release: make(chan struct{})}
	clk := clocktesting.NewFakeClock(time.Now())
	r := c.startReplica("orch-1", func(cfg *orchestrator.Config) {
		// A window of two chunks: the stream needs a grant from the
		// socket's writer every other token.
		cfg.Tokens, cfg.Clock, cfg.Window = tokens, clk, 2
	})
	c.startNode("node-1", r, nodeOpts{})
	// Registered last, so it runs first: the held recheck returns and the
	// database thaws before the replica and the node stop.
	t.Cleanup(func() {
		close(tokens.release)
		pgProxy.Thaw()
	})
	testenv.Eventually(c.t, "node-1 registered", func() bool {
		n, err := c.reg.Get(t.Context(), "node-1")
		return err == nil && n.Owner == "orch-1"
	})
	testenv.Eventually(c.t, "node-1 in the routing snapshot", func() bool {
		r.o().RefreshNow()
		_, ok := r.o().SnapshotNode("node-1")
		return ok
	})

	st, err := r.o().Dispatch(t.Context(), job("req-frozen", 40))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("first event: %v", err)
	}
	tokens.mu.Lock()
	tokens.armed = true
	tokens.mu.Unlock()
	pgProxy.Freeze()
	clk.Step(orchestrator.TokenRecheckInterval)
	select {
	case <-tokens.entered:
	case <-time.After(testenv.WaitFor):
		t.Fatal("the token recheck did not start")
	}

	done := make(chan result, 1)
	go func() { done <- drain(st) }()
	select {
	case got := <-done:
		if !got.complete() {
			t.Fatalf("stream ended incomplete: %+v", got)
		}
	case <-time.After(testenv.WaitFor):
		// The drain ends once the cleanup releases the recheck.
		t.Fatalf("stream stalled for %v while the token recheck waited on the frozen database", testenv.WaitFor)
	}
	if n, err := c.reg.Get(t.Context(), "node-1"); err != nil || n.State == registry.StateDraining {
		t.Fatalf("node-1 after the recheck: %+v, %v", n, err)
	}
}
