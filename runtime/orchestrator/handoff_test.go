package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestRequesterGoneMidStream: the replica that forwarded a request goes
// away mid-stream without cancelling it. The owner's relay finds nobody
// listening and cancels the request on the node: the engine stops, and
// the node's socket is free of it (before, the agent waited for credit
// forever, holding the engine slot).
func TestRequesterGoneMidStream(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	n1 := c.startNode("node-1", a, nodeOpts{sim: enginesim.Config{TimeScale: 2}})
	c.waitNode(n1.id, "orch-a")

	st, err := b.o().Dispatch(t.Context(), job("orphan", 4000))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(c.t, "the request runs on node-1", func() bool { return n1.sim.Stats().Running == 1 })
	b.halt() // the requester's replica goes; its consumer never reads again
	testenv.Eventually(c.t, "the orphaned request stops on node-1", func() bool { return n1.sim.Stats().Running == 0 })
	if st := n1.sim.Stats(); st.Finished != 0 {
		t.Errorf("the orphan ran to its end (%d finished), want it aborted", st.Finished)
	}
}

// TestRetryAfterLostAttemptRunsOnce: a forwarded request that the
// requester counts as lost before its first event (its node's record
// expired while the node still runs it) is retried on another node. The
// first attempt is cancelled, so the request runs once to its end, and
// the first attempt's late replies never reach the retry's stream.
func TestRetryAfterLostAttemptRunsOnce(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	// node-1 takes the request and sends nothing: the attempt is in
	// flight, not lost, when the requester decides it is.
	n1 := c.startNode("node-1", a, nodeOpts{sim: enginesim.Config{Faults: enginesim.Faults{Hang: true}}})
	rec := c.waitNode(n1.id, "orch-a")
	// node-2 joins only now, so the first attempt goes to node-1.
	got := make(chan result, 1)
	go func() {
		st, err := b.o().Dispatch(t.Context(), job("once", 60))
		if err != nil {
			got <- result{err: err}
			return
		}
		got <- drain(st)
	}()
	testenv.Eventually(c.t, "the first attempt reaches node-1's engine", func() bool { return n1.sim.Stats().Hung == 1 })
	n2 := c.startNode("node-2", a, nodeOpts{})
	c.waitNode(n2.id, "orch-a")
	b.o().NodeDied(n1.id, rec.Epoch) // the requester's watch reports node-1 gone
	var r result
	select {
	case r = <-got:
	case <-time.After(testenv.WaitFor):
		t.Fatal("the retried request hangs")
	}
	if !r.complete() {
		t.Fatalf("retried request: %+v, want complete", r)
	}
	// Before the fix the first attempt was never cancelled: node-1 held it
	// (and would have run it) for good.
	testenv.Eventually(c.t, "the first attempt is cancelled on node-1", func() bool { return n1.sim.Stats().Hung == 0 })
	if s := n2.sim.Stats(); s.Finished != 1 {
		t.Errorf("finished on node-2: %d, want the retry run there once", s.Finished)
	}
}

// TestRollingRestartKeepsForwardedStreams: the replica that owns a node
// restarts while another replica's forwarded stream runs on it. The node
// re-registers at a third replica at once, and its old socket carries the
// stream to its end: the requester does not fail it for the change of
// owner.
func TestRollingRestartKeepsForwardedStreams(t *testing.T) {
	c := newCluster(t)
	long := func(cfg *orchestrator.Config) { cfg.ShutdownGrace = time.Minute }
	a := c.startReplica("orch-a", long)
	b := c.startReplica("orch-b", nil)
	cc := c.startReplica("orch-c", nil)
	p := newCutProxy(t, a)
	// Real time: the stream must outlast the node's reconnect, which the
	// replica spreads over up to nodeproto.ReconnectSpread.
	n1 := c.startNode("node-1", a, nodeOpts{serverURL: p.wsURL(), sim: enginesim.Config{TimeScale: 1, MeanAnswerTokens: 1 << 20}})
	c.waitNode(n1.id, "orch-a")

	st, err := b.o().Dispatch(t.Context(), job("rolling", 1500))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan result, 1)
	go func() { got <- drain(st) }()
	p.retarget(cc) // the node's next connection reaches orch-c
	halted := make(chan struct{})
	go func() { defer close(halted); a.halt() }()
	// orch-a is leaving and refreshes no more: wait on the others.
	testenv.Eventually(c.t, "node-1 at orch-c in the registry and orch-b's snapshot", func() bool {
		rec, err := c.reg.Get(t.Context(), n1.id)
		n, ok := b.o().SnapshotNode(n1.id)
		return err == nil && rec.Owner == "orch-c" && ok && n.Owner == "orch-c"
	})
	select {
	case r := <-got:
		t.Fatalf("the stream ended before the node moved, so the test shows nothing: %+v", r)
	default:
	}
	staleAssignAnsweredOnce(t, c, n1)
	var r result
	select {
	case r = <-got:
	case <-time.After(3 * time.Minute): // a bound for a hung test
		t.Fatal("the forwarded stream hangs")
	}
	if !r.complete() {
		t.Errorf("forwarded stream through the restart: %+v, want it complete", r)
	}
	<-halted
}

// TestReplyOfAnotherAttemptIgnored: a reply that carries the request's id
// but another attempt's nonce (a late reply of an earlier try) never
// reaches the stream waiting on this try; the requester answers it with a
// cancel of that attempt on its node's channel, so nothing runs for nobody.
func TestReplyOfAnotherAttemptIgnored(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	n1 := c.startNode("node-1", a, nodeOpts{sim: enginesim.Config{Faults: enginesim.Faults{Hang: true}}})
	c.waitNode(n1.id, "orch-a")
	cancels := c.rdb.Subscribe(t.Context(), c.reg.Keys().NodeChannel(n1.id))
	defer cancels.Close()
	if _, err := cancels.Receive(t.Context()); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	got := make(chan error, 1)
	go func() {
		st, err := b.o().Dispatch(ctx, job("nonce", 20))
		if err == nil {
			st.Close()
			err = errors.New("dispatch returned a stream from another attempt's chunk")
		}
		got <- err
	}()
	testenv.Eventually(c.t, "the request hangs on node-1", func() bool { return n1.sim.Stats().Hung == 1 })
	chunk, err := nodeproto.Encode(&nodeproto.Chunk{RequestID: "nonce", Seq: 0, Delta: json.RawMessage(`{"choices":[{"delta":{"content":"x"}}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	forged := `{"node":"node-1","id":"nonce","attempt":987654321}` + "\n" + string(chunk)
	if err := c.rdb.Publish(t.Context(), c.reg.Keys().ReplicaChannel("orch-b"), forged).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(testenv.WaitFor)
	for {
		var msg *redis.Message
		select {
		case msg = <-cancels.Channel():
		case <-deadline:
			t.Fatal("no cancel of the stray attempt on node-1's channel")
		}
		if strings.Contains(msg.Payload, `"attempt":987654321`) && strings.Contains(msg.Payload, `"cancel"`) {
			break
		}
	}
	select {
	case err := <-got:
		t.Fatalf("the dispatch ended on another attempt's reply: %v", err)
	default:
	}
	stop()
	<-got
}

// staleAssignAnsweredOnce publishes an assign routed from a stale
// snapshot (epoch 1, while node-1's old socket at orch-a is leaving and
// its new one at orch-c holds epoch 2) and checks that only the new socket
// answers it: the leaving socket stays silent instead of replying lost,
// which made the requester retry while the run went on.
func staleAssignAnsweredOnce(t *testing.T, c *cluster, n1 *node) {
	t.Helper()
	replies := c.rdb.Subscribe(t.Context(), c.reg.Keys().ReplicaChannel("orch-x"))
	defer replies.Close()
	if _, err := replies.Receive(t.Context()); err != nil {
		t.Fatal(err)
	}
	j := job("stale", 20)
	body := j.EngineBody(n1.sim.ServedModelName())
	assign, err := nodeproto.Encode(&nodeproto.Assign{RequestID: "stale", Model: testModel, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	head := `{"node":"node-1","from":"orch-x","epoch":1,"attempt":5}` + "\n"
	if err := c.rdb.Publish(t.Context(), c.reg.Keys().NodeChannel(n1.id), head+string(assign)).Err(); err != nil {
		t.Fatal(err)
	}
	defer func() { // the test grants no credit: end the run
		cancel, _ := nodeproto.Encode(&nodeproto.Cancel{RequestID: "stale", Reason: "test_over"})
		_ = c.rdb.Publish(context.Background(), c.reg.Keys().NodeChannel(n1.id),
			`{"node":"node-1","from":"orch-x","epoch":2,"attempt":5}`+"\n"+string(cancel)).Err()
	}()
	deadline := time.After(testenv.WaitFor)
	for chunks := 0; chunks < 2; {
		select {
		case msg := <-replies.Channel():
			if strings.Contains(msg.Payload, `"lost"`) {
				t.Fatalf("a socket answered the stale assign with lost: %s", msg.Payload)
			}
			if strings.Contains(msg.Payload, `"chunk"`) {
				chunks++
			}
		case <-deadline:
			t.Fatal("nobody ran the stale assign")
		}
	}
}

// restartRedis does to the cluster what a Redis restart without
// persistence does: every key of the test's prefix is gone and every
// connection, pub/sub included, is dropped.
func (c *cluster) restartRedis() {
	c.t.Helper()
	ctx := context.Background()
	iter := c.rdb.Scan(ctx, 0, c.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		_ = c.rdb.Del(ctx, iter.Val()).Err()
	}
	if err := iter.Err(); err != nil {
		c.t.Fatal(err)
	}
	_ = c.rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err()
	_ = c.rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "normal").Err()
}

// TestRedisRestartWithoutPersistence: Redis loses every record and drops
// every connection while a forwarded stream runs. Every node is back at
// once — the one running the stream too, on a new connection, while its
// old one carries the stream (before, that node stayed out until its
// requests ended, forever for an orphan) — and no request is left running
// on an engine.
func TestRedisRestartWithoutPersistence(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	slow := enginesim.Config{TimeScale: 2, MeanAnswerTokens: 1 << 20}
	n1 := c.startNode("node-1", a, nodeOpts{sim: slow})
	n2 := c.startNode("node-2", a, nodeOpts{sim: slow})
	c.waitNode(n1.id, "orch-a")
	c.waitNode(n2.id, "orch-a")
	// One stream on the owner's own socket, which Redis does not carry,
	// and one forwarded from the other replica, whose replies it does.
	local, err := a.o().Dispatch(t.Context(), job("restart-local", 1500))
	if err != nil {
		t.Fatal(err)
	}
	forwarded, err := b.o().Dispatch(t.Context(), job("restart-forwarded", 1500))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan result, 1)
	go func() { got <- drain(local) }()
	fwd := make(chan result, 1)
	go func() { fwd <- drain(forwarded) }()
	running := func() int { return n1.sim.Stats().Running + n2.sim.Stats().Running }
	testenv.Eventually(c.t, "both streams run", func() bool { return running() == 2 })
	c.restartRedis()
	testenv.Eventually(c.t, "both nodes registered again", func() bool {
		n1r, err1 := c.reg.Get(t.Context(), n1.id)
		n2r, err2 := c.reg.Get(t.Context(), n2.id)
		return err1 == nil && err2 == nil && n1r.Owner != "" && n2r.Owner != ""
	})
	select {
	case r := <-got:
		t.Errorf("the local stream ended (%+v) before the nodes came back: the node running it stayed out of routing for its length", r)
	default:
	}
	select {
	case <-fwd: // its replies crossed the restart: broken or complete, it ended
	case <-time.After(3 * time.Minute): // a bound for a hung test
		t.Fatal("the forwarded stream hangs after the Redis restart")
	}
	select {
	case r := <-got:
		if !r.complete() {
			t.Errorf("the local stream through the restart: %+v, want it complete", r)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the local stream hangs after the Redis restart")
	}
	testenv.Eventually(c.t, "no request left on the engines", func() bool { return running() == 0 })
}
