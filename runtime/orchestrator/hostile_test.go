package orchestrator_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/testenv"
	"github.com/llmplat/llmplat/runtime/wsconn"
)

// hostileNode is a hand-written agent with a valid token: it registers
// over a real WebSocket, beats, and sends whatever the test writes.
type hostileNode struct {
	t    *testing.T
	id   string
	conn *wsconn.Conn
}

// hostileBeat is how often a hostile node beats: well inside the 10 s a
// node stays routable without one, on any machine.
const hostileBeat = time.Second

// dialHostile registers node id at r with its own valid token, serving
// models (testModel when none), and beats for it until the test ends.
func (c *cluster) dialHostile(t *testing.T, r *replica, id string, models ...string) *hostileNode {
	t.Helper()
	issued, err := c.tokens.Issue(t.Context(), id, "issue-"+id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := wsconn.Dial(t.Context(), r.wsURL())
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(nodeproto.AgentReadLimit)
	h := &hostileNode{t: t, id: id, conn: conn}
	if len(models) == 0 {
		models = []string{testModel}
	}
	reg := &nodeproto.Register{NodeID: id, Token: nodeproto.Secret(issued.Token), Version: "hostile", Location: nodeproto.LocationOnPrem}
	for _, m := range models {
		reg.Models = append(reg.Models, nodeproto.Model{Name: m, ServedName: "m", MaxNumSeqs: 8, MaxModelLen: 4096, KVCapacityTokens: 100000})
	}
	h.send(reg)
	if _, ok := h.next().(*nodeproto.Welcome); !ok {
		t.Fatalf("hostile node %s not welcomed", id)
	}
	ctx, stop := context.WithCancel(context.Background())
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		b, _ := nodeproto.Encode(&nodeproto.Heartbeat{})
		tick := time.NewTicker(hostileBeat)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if conn.Write(ctx, b) != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		stop()
		<-beating
		_ = conn.CloseNow()
	})
	return h
}

// send encodes f and writes it.
func (h *hostileNode) send(f nodeproto.Frame) {
	h.t.Helper()
	b, err := nodeproto.Encode(f)
	if err != nil {
		h.t.Fatal(err)
	}
	h.sendRaw(b)
}

// sendRaw writes b as one text frame, whatever its bytes.
func (h *hostileNode) sendRaw(b []byte) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), testenv.WaitFor)
	defer cancel()
	if err := h.conn.Write(ctx, b); err != nil {
		h.t.Fatal(err)
	}
}

// next reads the server's next frame.
func (h *hostileNode) next() nodeproto.Frame {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), testenv.WaitFor)
	defer cancel()
	msg, err := h.conn.Read(ctx)
	if err != nil {
		h.t.Fatalf("hostile node %s: read: %v", h.id, err)
	}
	f, err := nodeproto.Decode(msg)
	if err != nil {
		h.t.Fatalf("undecodable frame from the server: %v", err)
	}
	return f
}

// await reads frames until one of type T for which ok holds.
func await[T nodeproto.Frame](h *hostileNode, ok func(T) bool) T {
	h.t.Helper()
	for {
		if f, is := h.next().(T); is && ok(f) {
			return f
		}
	}
}

// acked waits for the server's ack of a done for requestID.
func (h *hostileNode) acked(requestID string) {
	h.t.Helper()
	await(h, func(a *nodeproto.Ack) bool {
		for _, id := range a.RequestIDs {
			if id == requestID {
				return true
			}
		}
		return false
	})
}

// chunkDelta is an engine event with one content token.
const chunkDelta = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}`

// dispatchTo dispatches a job in the background: the node must answer it
// before Dispatch returns.
func dispatchTo(r *replica, id string) <-chan dispatched {
	ch := make(chan dispatched, 1)
	go func() {
		st, err := r.o().Dispatch(context.Background(), job(id, 20))
		ch <- dispatched{st, err}
	}()
	return ch
}

type dispatched struct {
	st  dispatch.Stream
	err error
}

// TestDoneOnlyFromAssignedNode: a node's done frame for a request it was
// never assigned is acknowledged but not recorded, so the ledger sweeper
// cannot bill someone's orphaned row from it; the dones of requests it was
// assigned are recorded, a request cancelled before its done included.
func TestDoneOnlyFromAssignedNode(t *testing.T) {
	c := newCluster(t)
	r := c.startReplica("orch-a", nil)
	h := c.dialHostile(t, r, "evil-1")
	c.waitNode(h.id, "orch-a")
	log := c.completionLog()

	// Forged: a request id the node never saw.
	h.send(&nodeproto.Done{RequestID: "victim-req", PromptTokens: 100, CompletionTokens: 1_000_000, FinishReason: "stop"})
	h.acked("victim-req")
	if u, ok, err := log.Completion(t.Context(), "victim-req"); ok || err != nil {
		t.Errorf("forged done recorded: %+v, %v, %v; want nothing", u, ok, err)
	}

	// Assigned, answered to its end.
	res := dispatchTo(r, "assigned-req")
	a := await(h, func(a *nodeproto.Assign) bool { return a.RequestID == "assigned-req" })
	h.send(&nodeproto.Chunk{RequestID: a.RequestID, Seq: 0, Delta: json.RawMessage(chunkDelta)})
	h.send(&nodeproto.Done{RequestID: a.RequestID, PromptTokens: 7, CompletionTokens: 1, FinishReason: "stop"})
	d := <-res
	if d.err != nil {
		t.Fatal(d.err)
	}
	drain(d.st)
	h.acked(a.RequestID)

	// Assigned, cancelled by its consumer before the node's done.
	res = dispatchTo(r, "cancelled-req")
	a = await(h, func(a *nodeproto.Assign) bool { return a.RequestID == "cancelled-req" })
	h.send(&nodeproto.Chunk{RequestID: a.RequestID, Seq: 0, Delta: json.RawMessage(chunkDelta)})
	if d = <-res; d.err != nil {
		t.Fatal(d.err)
	}
	d.st.Close()
	await(h, func(cl *nodeproto.Cancel) bool { return cl.RequestID == "cancelled-req" })
	h.send(&nodeproto.Done{RequestID: a.RequestID, PromptTokens: 7, CompletionTokens: 1, FinishReason: "abort"})
	h.acked(a.RequestID)

	for _, id := range []string{"assigned-req", "cancelled-req"} {
		if u, ok, err := log.Completion(t.Context(), id); !ok || err != nil || u.PromptTokens != 7 || u.CompletionTokens != 1 {
			t.Errorf("%s: Completion = %+v, %v, %v; want the node's 7/1", id, u, ok, err)
		}
	}
	if u, ok, err := log.Completion(t.Context(), "victim-req"); ok || err != nil {
		t.Errorf("forged done recorded: %+v, %v, %v; want nothing", u, ok, err)
	}
}

// TestInvalidUTF8FromNodeReplaced: a chunk whose text holds invalid UTF-8
// reaches the consumer as valid UTF-8, each invalid run as U+FFFD, as the
// agent does with an engine's bytes.
func TestInvalidUTF8FromNodeReplaced(t *testing.T) {
	c := newCluster(t)
	r := c.startReplica("orch-a", nil)
	h := c.dialHostile(t, r, "evil-utf8")
	c.waitNode(h.id, "orch-a")
	res := dispatchTo(r, "utf8-req")
	a := await(h, func(a *nodeproto.Assign) bool { return a.RequestID == "utf8-req" })
	delta := `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a` + "\xff\xfe" + `b"}}]}`
	h.send(&nodeproto.Chunk{RequestID: a.RequestID, Seq: 0, Delta: json.RawMessage(delta)})
	h.send(&nodeproto.Done{RequestID: a.RequestID, PromptTokens: 7, CompletionTokens: 1, FinishReason: "stop"})
	d := <-res
	if d.err != nil {
		t.Fatal(d.err)
	}
	defer d.st.Close()
	ev, err := d.st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a` + "\uFFFD" + `b"}}]}`
	if string(ev.Data) != want {
		t.Errorf("event %q, want %q", ev.Data, want)
	}
}

// TestCloudRegistrationRefused: a node token cannot register a cloud node
// with a service URL of its choosing, to which the orchestrator would post
// users' prompts: it gets error 403 and close 1008, no record, and the URL
// is never called.
func TestCloudRegistrationRefused(t *testing.T) {
	c := newCluster(t)
	r := c.startReplica("orch-a", nil)
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "internal secret", http.StatusBadRequest)
	}))
	defer target.Close()
	issued, err := c.tokens.Issue(t.Context(), "evil-cloud", "issue-evil-cloud", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := nodeproto.Encode(&nodeproto.Register{NodeID: "evil-cloud", Token: nodeproto.Secret(issued.Token), Version: "x",
		Location: nodeproto.LocationCloud, ServiceURL: target.URL + "/internal/admin?",
		Models: []nodeproto.Model{{Name: testModel, ServedName: "m", MaxNumSeqs: 8, MaxModelLen: 4096, KVCapacityTokens: 100000}}})
	if err != nil {
		t.Fatal(err)
	}
	f, code := rawNode(t, r, b)
	if e, ok := f.(*nodeproto.Error); !ok || e.Status != http.StatusForbidden || code != wsconn.StatusPolicyViolation {
		t.Fatalf("cloud registration answered %#v, close %d; want error 403 and 1008", f, code)
	}
	if n, err := c.reg.Get(t.Context(), "evil-cloud"); err == nil {
		t.Errorf("refused node has a record: %+v", n)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the node's URL was called %d times", n)
	}
}

// TestCloudRecordNotRouted: a cloud record in the registry, as a replica
// of an older version wrote from a node's registration, is never routed
// to: cloud nodes come from the cluster or the configuration only.
func TestCloudRecordNotRouted(t *testing.T) {
	c := newCluster(t)
	r := c.startReplica("orch-a", nil)
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "internal secret", http.StatusBadRequest)
	}))
	defer target.Close()
	epoch, err := c.reg.Register(t.Context(), registryCloudRecord("old-cloud", target.URL))
	if err != nil {
		t.Fatal(err)
	}
	// A node registered after the record: once every snapshot holds it,
	// every snapshot was read after the record was written.
	later := c.dialHostile(t, r, "later-1", "other-model")
	c.waitNode(later.id, "orch-a")
	// The record is fresh, as an older replica's beats would keep it.
	if ok, err := c.reg.Heartbeat(t.Context(), "old-cloud", epoch, registry.Heartbeat{}); !ok || err != nil {
		t.Fatalf("beat of the cloud record = %v, %v", ok, err)
	}
	_, err = r.o().Dispatch(t.Context(), job("to-old-cloud", 20))
	if err == nil || hits.Load() != 0 {
		t.Errorf("Dispatch = %v with the record's URL called %d times; want no node and no call", err, hits.Load())
	}
}

// rawNodeFrom is rawNode dialled from the local address ip (127.0.0.0/8
// are all this machine's), as nodes behind one NAT share an address. It
// reports errors instead of failing, for use off the test's goroutine.
func rawNodeFrom(ctx context.Context, url string, ip net.IP, first []byte) (nodeproto.Frame, error) {
	d := websocket.Dialer{NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}).DialContext}
	ws, _, err := d.DialContext(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, first); err != nil {
		return nil, err
	}
	_ = ws.SetReadDeadline(time.Now().Add(testenv.WaitFor))
	_, msg, err := ws.ReadMessage()
	if err != nil {
		return nil, err
	}
	return nodeproto.Decode(msg)
}

// TestValidTokenBehindFloodedAddress: after an address has sent enough bad
// registrations to be limited, a node with a valid token behind the same
// address (a NAT) still registers.
func TestValidTokenBehindFloodedAddress(t *testing.T) {
	c := newCluster(t)
	r := c.startReplica("orch-a", nil)
	ctx, stop := context.WithCancel(t.Context())
	var answers sync.Map
	flooded := make(chan struct{})
	go func() { defer close(flooded); junkFlood(ctx, r.wsURL(), &answers) }()
	defer func() { stop(); <-flooded }()
	testenv.Eventually(c.t, "the flooding address limited", func() bool {
		n, ok := answers.Load("retry_after:too many bad registrations from this address")
		return ok && n.(*atomic.Int64).Load() > 0
	})
	issued, err := c.tokens.Issue(t.Context(), "nat-1", "issue-nat-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f, err := rawNodeFrom(t.Context(), r.wsURL(), net.IPv4(127, 0, 0, 2), register(t, "nat-1", issued.Token))
	if _, ok := f.(*nodeproto.Welcome); !ok || err != nil {
		t.Errorf("valid token from the flooded address answered %#v, %v; want welcome", f, err)
	}
}

// TestLoopingNodeDoesNotStarveOthers: a node re-registering in a loop with
// its own valid token is held to its own allowance, so another node still
// registers in the next second under a cluster-wide rate of 3 a second,
// and the looping node's registrations leave a bounded number of event
// rows.
func TestLoopingNodeDoesNotStarveOthers(t *testing.T) {
	const loopers, rate = 4, 3
	c := newCluster(t)
	r := c.startReplica("orch-a", func(cfg *orchestrator.Config) { cfg.RegistrationsPerSecond = rate })
	issued, err := c.tokens.Issue(t.Context(), "loop-1", "issue-loop-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	frame := register(t, "loop-1", issued.Token)
	ctx, stop := context.WithCancel(t.Context())
	var attempts atomic.Int64
	var wg sync.WaitGroup
	for range loopers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := rawNodeFrom(ctx, r.wsURL(), net.IPv4(127, 0, 0, 3), frame); err == nil {
					attempts.Add(1)
				}
			}
		})
	}
	defer func() { stop(); wg.Wait() }()
	testenv.Eventually(c.t, "the looping node's attempts", func() bool { return attempts.Load() >= 60 })
	other, err := c.tokens.Issue(t.Context(), "other-1", "issue-other-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	waitNextSecond()
	f, err := rawNodeFrom(t.Context(), r.wsURL(), net.IPv4(127, 0, 0, 4), register(t, "other-1", other.Token))
	if _, ok := f.(*nodeproto.Welcome); !ok || err != nil {
		t.Errorf("another node answered %#v, %v while one node loops; want welcome", f, err)
	}
	stop()
	wg.Wait()
	var rows int
	if err := c.db.QueryRowContext(t.Context(), "SELECT count(*) FROM node_events WHERE node_id = 'loop-1' AND kind = 'register'").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows > maxNodeRegistrations {
		t.Errorf("the looping node left %d registration rows over %d attempts, want at most %d", rows, attempts.Load(), maxNodeRegistrations)
	}
	t.Logf("%d attempts of the looping node, %d registered", attempts.Load(), rows)
}

// maxNodeRegistrations is the registrations one node id is admitted in a
// minute (the orchestrator's nodeRegistrationsPerWindow).
const maxNodeRegistrations = 10

// completionLog is the cluster's completion log.
func (c *cluster) completionLog() *orchestrator.CompletionLog {
	return orchestrator.NewCompletionLog(c.rdb, c.prefix)
}

// registryCloudRecord is a cloud node's record as an older replica wrote
// it from a registration.
func registryCloudRecord(id, url string) registry.NodeRecord {
	return registry.NodeRecord{ID: id, Owner: "orch-old", Location: registry.LocationCloud, ServiceURL: url, Version: "old",
		Models: []registry.ModelSlot{{Name: testModel, ServedName: "m", MaxNumSeqs: 8, MaxModelLen: 4096, KVCapacityTokens: 100000}}}
}
