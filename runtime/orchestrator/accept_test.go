package orchestrator_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/testenv"
	"github.com/llmplat/llmplat/runtime/wsconn"
)

// rawNode dials a replica as a hand-written agent and sends first; it
// returns the server's answer frame (nil if none) and the close status.
func rawNode(t *testing.T, r *replica, first []byte) (nodeproto.Frame, wsconn.StatusCode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testenv.WaitFor)
	defer cancel()
	conn, err := wsconn.Dial(ctx, r.wsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(nodeproto.AgentReadLimit)
	if err := conn.Write(ctx, first); err != nil {
		t.Fatal(err)
	}
	var answer nodeproto.Frame
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			return answer, wsconn.CloseStatus(err)
		}
		f, err := nodeproto.Decode(msg)
		if err != nil {
			t.Fatalf("undecodable frame from the server: %v", err)
		}
		if answer == nil {
			answer = f
		}
		if _, ok := f.(*nodeproto.Welcome); ok {
			return f, -1 // registered: the test is done with it
		}
	}
}

// register returns a register frame for a node with a token.
func register(t *testing.T, nodeID, token string) []byte {
	t.Helper()
	b, err := nodeproto.Encode(&nodeproto.Register{NodeID: nodeID, Token: nodeproto.Secret(token), Version: "test",
		Location: nodeproto.LocationOnPrem, Models: []nodeproto.Model{{Name: testModel, ServedName: "m", MaxNumSeqs: 8, MaxModelLen: 4096, KVCapacityTokens: 10000}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRegistrationRefusals checks each way a registration is refused, and
// the frame and close code each gets.
func TestRegistrationRefusals(t *testing.T) {
	c := newCluster(t)
	r := c.startReplica("orch-a", func(cfg *orchestrator.Config) { cfg.RegistrationsPerSecond = 1 })
	token := func(id string) string {
		issued, err := c.tokens.Issue(t.Context(), id, "issue-"+id, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return issued.Token
	}

	t.Run("first frame not register", func(t *testing.T) {
		hb, _ := nodeproto.Encode(&nodeproto.Heartbeat{})
		_, code := rawNode(t, r, hb)
		if code != wsconn.StatusProtocolError {
			t.Errorf("close %d, want 1002", code)
		}
	})
	t.Run("token of another node", func(t *testing.T) {
		waitNextSecond()
		f, code := rawNode(t, r, register(t, "node-x", token("node-y")))
		e, ok := f.(*nodeproto.Error)
		if !ok || e.Status != 401 || code != wsconn.StatusPolicyViolation {
			t.Errorf("answer %#v, close %d; want error 401 and 1008", f, code)
		}
	})
	t.Run("over the rate", func(t *testing.T) {
		// Two registrations must fall in one second of the Redis clock; on
		// a slow machine the second may cross into the next, and then the
		// pair is tried again with new nodes.
		const tries = 5
		for i := range tries {
			id1, id2 := fmt.Sprintf("node-%d", 2*i+1), fmt.Sprintf("node-%d", 2*i+2)
			reg1, reg2 := register(t, id1, token(id1)), register(t, id2, token(id2))
			waitNextSecond()
			first, _ := rawNode(t, r, reg1)
			if _, ok := first.(*nodeproto.Welcome); !ok {
				t.Fatalf("first registration answered %#v, want welcome", first)
			}
			f, code := rawNode(t, r, reg2)
			if _, welcomed := f.(*nodeproto.Welcome); welcomed && i < tries-1 {
				t.Logf("try %d: the second registration fell into the next second", i+1)
				continue
			}
			ra, ok := f.(*nodeproto.RetryAfter)
			if !ok || ra.Seconds < 1 || code != wsconn.StatusTryAgainLater {
				t.Errorf("second registration in one second: answer %#v, close %d; want retry_after ≥ 1 s and 1013", f, code)
			}
			return
		}
	})
}

// waitNextSecond sleeps into the next wall-clock second, so that a test
// starts with the registration limit's second unused.
func waitNextSecond() {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second + 50*time.Millisecond).Sub(now))
}

// junkFlood sends registrations with bad tokens from 127.0.0.2 until ctx
// ends, and counts the answers by kind.
func junkFlood(ctx context.Context, url string, answers *sync.Map) {
	d := websocket.Dialer{NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}
	for i := 0; ctx.Err() == nil; i++ {
		ws, _, err := d.DialContext(ctx, url, nil)
		if err != nil {
			continue
		}
		b, _ := nodeproto.Encode(&nodeproto.Register{NodeID: fmt.Sprintf("junk-%d", i), Token: "llpnode_not-a-real-token-0123456789abcdef",
			Version: "x", Location: nodeproto.LocationOnPrem,
			Models: []nodeproto.Model{{Name: testModel, ServedName: "m", MaxNumSeqs: 1, MaxModelLen: 16, KVCapacityTokens: 16}}})
		_ = ws.WriteMessage(websocket.TextMessage, b)
		_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, msg, err := ws.ReadMessage(); err == nil {
			f, _ := nodeproto.Decode(msg)
			kind := "other"
			switch f := f.(type) {
			case *nodeproto.Error:
				kind = "bad_token"
			case *nodeproto.RetryAfter:
				kind = "retry_after:" + f.Reason
			}
			n, _ := answers.LoadOrStore(kind, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
		ws.Close()
	}
}

// TestJunkRegistrationsDoNotLockOut: a flood of registrations with bad
// tokens from one address spends neither the cluster-wide registration
// rate (the token is checked first) nor, past a few, the token store (the
// address is refused before any lookup): a real node registers while the
// flood goes on.
func TestJunkRegistrationsDoNotLockOut(t *testing.T) {
	c := newCluster(t)
	r := c.startReplica("orch-a", func(cfg *orchestrator.Config) { cfg.RegistrationsPerSecond = 2 })
	ctx, stop := context.WithCancel(t.Context())
	var answers sync.Map
	flooded := make(chan struct{})
	go func() { defer close(flooded); junkFlood(ctx, r.wsURL(), &answers) }()
	count := func(kind string) int64 {
		if n, ok := answers.Load(kind); ok {
			return n.(*atomic.Int64).Load()
		}
		return 0
	}
	testenv.Eventually(c.t, "the flooding address refused before any lookup", func() bool {
		return count("retry_after:too many bad registrations from this address") > 0
	})
	n := c.startNode("real-1", r, nodeOpts{})
	c.waitNode(n.id, "orch-a")
	stop()
	<-flooded
	if got := count("bad_token"); got < 1 || got > 20 {
		t.Errorf("%d bad-token answers from one address before it was limited, want 1 to 20", got)
	}
	if got := count("retry_after:registration rate"); got != 0 {
		t.Errorf("junk spent the registration rate %d times", got)
	}
}
