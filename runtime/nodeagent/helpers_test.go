package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds every wait of a test: generous for a loaded machine.
const waitFor = 10 * time.Second

// testModel is the one model the test agent serves.
const testModel = "llama-8b"

// fakeServer is an orchestrator speaking nodeproto over a real WebSocket.
type fakeServer struct {
	srv   *httptest.Server
	conns chan *serverConn
	// onRegister answers a registration; nil means welcome.
	onRegister func(n int) nodeproto.Frame
}

// serverConn is one accepted agent connection.
type serverConn struct {
	c        *websocket.Conn
	register *nodeproto.Register
	frames   chan nodeproto.Frame
}

func newFakeServer(t *testing.T, onRegister func(n int) nodeproto.Frame) *fakeServer {
	t.Helper()
	// conns is buffered so a handler never waits for the test to look.
	fs := &fakeServer{conns: make(chan *serverConn, 16), onRegister: onRegister}
	n := 0
	fs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(nodeproto.ServerReadLimit)
		_, msg, err := c.Read(r.Context())
		if err != nil {
			return
		}
		f, err := nodeproto.Decode(msg)
		reg, ok := f.(*nodeproto.Register)
		if err != nil || !ok {
			c.Close(websocket.StatusProtocolError, "first frame must be register")
			return
		}
		n++
		answer := nodeproto.Frame(&nodeproto.Welcome{Epoch: int64(n), HeartbeatInterval: 1, Window: nodeproto.DefaultWindow, OrchestratorID: "orch-test"})
		if fs.onRegister != nil {
			answer = fs.onRegister(n)
		}
		// frames is buffered so the handler keeps reading (and answering
		// pings and closes) whatever the test does.
		sc := &serverConn{c: c, register: reg, frames: make(chan nodeproto.Frame, 4096)}
		b, _ := nodeproto.Encode(answer)
		if err := c.Write(r.Context(), websocket.MessageText, b); err != nil {
			return
		}
		fs.conns <- sc
		defer close(sc.frames)
		for {
			_, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			f, err := nodeproto.Decode(msg)
			if err != nil {
				return
			}
			sc.frames <- f
		}
	}))
	t.Cleanup(fs.srv.Close)
	return fs
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

// send writes a frame to the agent.
func (sc *serverConn) send(t *testing.T, f nodeproto.Frame) {
	t.Helper()
	b, err := nodeproto.Encode(f)
	if err != nil {
		t.Fatalf("encode %s: %v", f.Type(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := sc.c.Write(ctx, websocket.MessageText, b); err != nil {
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

// newSim starts a simulator that runs faster than real time, served over
// HTTP, until the test ends.
func newSim(t *testing.T) (*enginesim.Sim, string) {
	t.Helper()
	sim, err := enginesim.New(enginesim.Config{TimeScale: 10, Seed: 7, MeanAnswerTokens: 4000})
	if err != nil {
		t.Fatalf("enginesim.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sim.Run(ctx)
	}()
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
	})
	return sim, srv.URL
}

// startAgent runs an agent against fs and sim until the test ends, and
// returns Run's result channel and a function that stops it.
func startAgent(t *testing.T, fs *fakeServer, sim *enginesim.Sim, engineURL string) (<-chan error, context.CancelFunc) {
	t.Helper()
	a, err := New(Config{
		ServerURL: fs.url(),
		NodeID:    "node-test-1",
		Token:     "nt_secret",
		EngineURL: engineURL,
		Models: []nodeproto.Model{{Name: testModel, ServedName: sim.ServedModelName(),
			MaxNumSeqs: 64, MaxModelLen: int(sim.MaxModelLen()), KVCapacityTokens: 100000}},
		Rand: rand.NewPCG(1, 2),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- a.Run(ctx) }()
	stopped := false
	t.Cleanup(func() {
		cancel()
		if !stopped {
			if err := waitRun(res); err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	})
	return res, func() { cancel(); stopped = true }
}

// waitRun waits for Run's result.
func waitRun(res <-chan error) error {
	select {
	case err := <-res:
		return err
	case <-time.After(waitFor):
		return errors.New("Run did not return")
	}
}

// assignFrame asks for a streamed completion of at most maxTokens tokens.
func assignFrame(id, model, served string, maxTokens int) *nodeproto.Assign {
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Tell me a long story about ships."}],"max_tokens":%d,"ignore_eos":true}`, served, maxTokens)
	return &nodeproto.Assign{RequestID: id, Model: model, Body: []byte(body)}
}
