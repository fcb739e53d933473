package nodeagent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/wsconn"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// fakeOpts configures a fakeServer.
type fakeOpts struct {
	// onRegister answers the n-th registration; nil means welcome.
	onRegister func(n int) nodeproto.Frame
	// window is welcome's per-request credit; 0 means DefaultWindow.
	window int
	// manualCredit turns off the grants the server makes as it reads, as
	// the orchestrator does (half a window at a time): the test grants.
	manualCredit bool
	// manualAck turns off the ack the server sends for each done.
	manualAck bool
	// silent makes the server stop reading after its answer to the
	// registration, as a server gone without a close (a half-open link):
	// it answers no ping.
	silent bool
}

// fakeServer is an orchestrator speaking nodeproto over a real WebSocket.
// Like the real one it enforces each request's credit: a chunk beyond it
// fails the test and closes the connection with 1002.
type fakeServer struct {
	t     *testing.T
	srv   *httptest.Server
	opts  fakeOpts
	conns chan *serverConn
	quit  chan struct{} // closed when the test ends, freeing silent handlers
}

// serverConn is one accepted agent connection.
type serverConn struct {
	fs       *fakeServer
	c        *wsconn.Conn
	register *nodeproto.Register
	window   int
	frames   chan nodeproto.Frame

	mu      sync.Mutex
	granted map[string]int // window grants sent, by request
	used    map[string]int // chunks received, by request
	pending map[string]int // chunks read since the last automatic grant
}

func newFakeServer(t *testing.T, opts fakeOpts) *fakeServer {
	t.Helper()
	if opts.window == 0 {
		opts.window = nodeproto.DefaultWindow
	}
	// conns is buffered so a handler never waits for the test to look.
	fs := &fakeServer{t: t, opts: opts, conns: make(chan *serverConn, 16), quit: make(chan struct{})}
	var mu sync.Mutex
	n := 0
	fs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		nth := n
		mu.Unlock()
		fs.handle(w, r, nth)
	}))
	t.Cleanup(fs.srv.Close)
	t.Cleanup(func() { close(fs.quit) }) // runs before srv.Close
	return fs
}

// handle serves one agent connection: register, the answer, then frames.
func (fs *fakeServer) handle(w http.ResponseWriter, r *http.Request, n int) {
	c, err := wsconn.Accept(w, r)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(nodeproto.ServerReadLimit)
	msg, err := c.Read(r.Context())
	if err != nil {
		return
	}
	f, err := nodeproto.Decode(msg)
	reg, ok := f.(*nodeproto.Register)
	if err != nil || !ok {
		c.Close(wsconn.StatusProtocolError, "first frame must be register")
		return
	}
	answer := nodeproto.Frame(&nodeproto.Welcome{Epoch: int64(n), HeartbeatInterval: 1,
		Window: fs.opts.window, OrchestratorID: "orch-test"})
	if fs.opts.onRegister != nil {
		answer = fs.opts.onRegister(n)
	}
	// frames is buffered so the handler keeps reading (and answering
	// pings and closes) whatever the test does.
	sc := &serverConn{fs: fs, c: c, register: reg, frames: make(chan nodeproto.Frame, 4096),
		granted: map[string]int{}, used: map[string]int{}, pending: map[string]int{}}
	if wf, ok := answer.(*nodeproto.Welcome); ok {
		sc.window = wf.Window
	}
	b, _ := nodeproto.Encode(answer)
	if err := c.Write(r.Context(), b); err != nil {
		return
	}
	fs.conns <- sc
	defer close(sc.frames)
	if fs.opts.silent {
		<-fs.quit
		return
	}
	for {
		msg, err := c.Read(r.Context())
		if err != nil {
			return
		}
		f, err := nodeproto.Decode(msg)
		if err != nil {
			return
		}
		if !sc.account(r.Context(), f) {
			c.Close(wsconn.StatusProtocolError, "credit exceeded")
			return
		}
		sc.frames <- f
	}
}

// account checks a chunk against its request's credit and makes the
// automatic grants and acks; false means the agent broke the protocol.
func (sc *serverConn) account(ctx context.Context, f nodeproto.Frame) bool {
	switch f := f.(type) {
	case *nodeproto.Chunk:
		sc.mu.Lock()
		sc.used[f.RequestID]++
		used, allowed := sc.used[f.RequestID], sc.window+sc.granted[f.RequestID]
		grant := 0
		if !sc.fs.opts.manualCredit {
			sc.pending[f.RequestID]++
			if p := sc.pending[f.RequestID]; p >= max(1, sc.window/2) {
				grant, sc.pending[f.RequestID] = p, 0
				sc.granted[f.RequestID] += p
			}
		}
		sc.mu.Unlock()
		if used > allowed {
			sc.fs.t.Errorf("agent sent chunk %d of %s with a credit of %d", used, f.RequestID, allowed)
			return false
		}
		if grant > 0 {
			sc.write(ctx, &nodeproto.Window{RequestID: f.RequestID, Chunks: grant})
		}
	case *nodeproto.Done:
		if !sc.fs.opts.manualAck {
			sc.write(ctx, &nodeproto.Ack{RequestIDs: []string{f.RequestID}})
		}
	}
	return true
}

// write sends a frame from the handler; a failure ends the connection,
// which the handler's read sees.
func (sc *serverConn) write(ctx context.Context, f nodeproto.Frame) {
	b, err := nodeproto.Encode(f)
	if err != nil {
		sc.fs.t.Errorf("encode %s: %v", f.Type(), err)
		return
	}
	sc.c.Write(ctx, b)
}

// url returns the server's socket address.
func (fs *fakeServer) url() string {
	return "ws" + strings.TrimPrefix(fs.srv.URL, "http") + "/v1/nodes/connect"
}

// accept returns the next registered connection.
func (fs *fakeServer) accept(t *testing.T) *serverConn {
	t.Helper()
	select {
	case sc := <-fs.conns:
		return sc
	case <-time.After(waitFor):
		t.Fatal("no agent connected")
		return nil
	}
}

// send writes a frame to the agent; a window frame counts as credit
// before it leaves.
func (sc *serverConn) send(t *testing.T, f nodeproto.Frame) {
	t.Helper()
	b, err := nodeproto.Encode(f)
	if err != nil {
		t.Fatalf("encode %s: %v", f.Type(), err)
	}
	if w, ok := f.(*nodeproto.Window); ok {
		sc.mu.Lock()
		sc.granted[w.RequestID] += w.Chunks
		sc.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := sc.c.Write(ctx, b); err != nil {
		t.Fatalf("write %s: %v", f.Type(), err)
	}
}

// next returns the agent's next frame that is not a heartbeat.
func (sc *serverConn) next(t *testing.T) nodeproto.Frame {
	t.Helper()
	for {
		f := sc.nextAny(t)
		if _, ok := f.(*nodeproto.Heartbeat); !ok {
			return f
		}
	}
}

// nextAny returns the agent's next frame.
func (sc *serverConn) nextAny(t *testing.T) nodeproto.Frame {
	t.Helper()
	select {
	case f, ok := <-sc.frames:
		if !ok {
			t.Fatal("connection closed")
		}
		return f
	case <-time.After(waitFor):
		t.Fatal("no frame from the agent")
		return nil
	}
}

// quiet fails the test if the agent sends anything but heartbeats for d,
// and returns how many heartbeats came.
func (sc *serverConn) quiet(t *testing.T, d time.Duration) int {
	t.Helper()
	end := time.After(d)
	beats := 0
	for {
		select {
		case f, ok := <-sc.frames:
			if !ok {
				t.Fatal("connection closed")
			}
			if _, hb := f.(*nodeproto.Heartbeat); !hb {
				t.Fatalf("agent sent a %s frame (%s) while it should wait", f.Type(), nodeproto.RequestIDOf(f))
			}
			beats++
		case <-end:
			return beats
		}
	}
}
