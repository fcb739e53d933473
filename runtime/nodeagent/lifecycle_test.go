package nodeagent

import (
	"net/http"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestReconnectAfterServerClose(t *testing.T) {
	_, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	startAgent(t, fs, eng)
	first := fs.accept(t)
	first.c.CloseNow()
	second := fs.accept(t)
	if got, want := second.register.NodeID, first.register.NodeID; got != want {
		t.Errorf("second register node_id = %q, want %q", got, want)
	}
	if _, ok := second.nextAny(t).(*nodeproto.Heartbeat); !ok {
		t.Error("the new connection does not beat")
	}
}

func TestReconnectAdvice(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	startAgent(t, fs, eng)
	first := fs.accept(t)
	first.send(t, assignFrame("req-old", testModel, sim.ServedModelName(), 600))
	if _, ok := first.next(t).(*nodeproto.Chunk); !ok {
		t.Fatal("first answer is not a chunk")
	}
	first.send(t, &nodeproto.Reconnect{AfterMS: 0, Reason: "replica leaving"})
	second := fs.accept(t)
	if got := sim.Stats().Running; got != 1 {
		t.Errorf("simulator running = %d while the new connection registered, want the old request's 1", got)
	}
	second.send(t, assignFrame("req-new", testModel, sim.ServedModelName(), 4))
	if _, ok := second.next(t).(*nodeproto.Chunk); !ok {
		t.Error("the new connection does not serve assignments")
	}
	first.send(t, assignFrame("req-late", testModel, sim.ServedModelName(), 4))
	var refused, done bool
	for !refused || !done {
		switch f := first.next(t).(type) {
		case *nodeproto.Chunk:
		case *nodeproto.Done:
			if got, want := f.CompletionTokens, int64(600); got != want {
				t.Errorf("old request done completion_tokens = %d, want %d", got, want)
			}
			done = true
		case *nodeproto.Error:
			if got, want := f.Status, http.StatusServiceUnavailable; got != want {
				t.Errorf("late assign on the old socket: status %d, want %d", got, want)
			}
			refused = true
		default:
			t.Fatalf("unexpected %s frame on the old socket", f.Type())
		}
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	_, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{onRegister: func(n int) nodeproto.Frame {
		if n == 1 {
			return &nodeproto.RetryAfter{Seconds: 1, Reason: "rate limited"}
		}
		return &nodeproto.Welcome{Epoch: int64(n), HeartbeatInterval: 1, Window: nodeproto.DefaultWindow, OrchestratorID: "orch-test"}
	}})
	startAgent(t, fs, eng)
	fs.accept(t) // refused with retry_after
	start := time.Now()
	fs.accept(t) // welcomed
	// The agent waits 1 s plus jitter; its own first backoff draw would
	// be under 1 s. 50 ms covers the gap between the answer and accept.
	if got, want := time.Since(start), time.Second-50*time.Millisecond; got < want {
		t.Errorf("redialled after %v, want at least %v", got, want)
	}
}

func TestDrainFinishesInFlightThenReturns(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	ag := startAgent(t, fs, eng)
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-d1", testModel, sim.ServedModelName(), 400))
	if _, ok := sc.next(t).(*nodeproto.Chunk); !ok {
		t.Fatal("first answer is not a chunk")
	}
	sc.send(t, &nodeproto.Drain{})
	sc.send(t, assignFrame("req-d2", testModel, sim.ServedModelName(), 8))
	var refused, done bool
	for !refused || !done {
		switch f := sc.next(t).(type) {
		case *nodeproto.Chunk:
		case *nodeproto.Error:
			if got, want := f.RequestID, "req-d2"; got != want {
				t.Fatalf("error request_id = %q, want %q", got, want)
			}
			if got, want := f.Status, http.StatusServiceUnavailable; got != want {
				t.Errorf("error status = %d, want %d", got, want)
			}
			refused = true
		case *nodeproto.Done:
			if got, want := f.FinishReason, openai.FinishLength; got != want {
				t.Errorf("in-flight done finish_reason = %q, want %q", got, want)
			}
			if got, want := f.CompletionTokens, int64(400); got != want {
				t.Errorf("in-flight done completion_tokens = %d, want %d", got, want)
			}
			done = true
		default:
			t.Fatalf("unexpected %s frame", f.Type())
		}
	}
	if err := waitRun(ag.res); err != nil {
		t.Fatalf("Run after drain: %v", err)
	}
	ag.stop()
}

func TestRunReturnsOnCancelMidStream(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	ag := startAgent(t, fs, eng)
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-x", testModel, sim.ServedModelName(), 3000))
	if _, ok := sc.next(t).(*nodeproto.Chunk); !ok {
		t.Fatal("first answer is not a chunk")
	}
	ag.stop()
	if err := waitRun(ag.res); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}

func TestDrainDeadlineCancelsThenReturns(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	ag := startAgent(t, fs, eng)
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-dl", testModel, eng.served, 3000))
	readChunks(t, sc, "req-dl", 0, 1)
	const deadline = 300 * time.Millisecond
	sc.send(t, &nodeproto.Drain{DeadlineMS: deadline.Milliseconds()})
	start := time.Now()
	var done *nodeproto.Done
	for done == nil {
		switch f := sc.next(t).(type) {
		case *nodeproto.Chunk:
		case *nodeproto.Done:
			done = f
		default:
			t.Fatalf("unexpected %s frame", f.Type())
		}
	}
	if got, want := time.Since(start), deadline-50*time.Millisecond; got < want {
		t.Errorf("cancelled %v after the drain, want at least %v", got, want)
	}
	if got, want := done.FinishReason, openai.FinishAbort; got != want {
		t.Errorf("done finish_reason = %q, want %q", got, want)
	}
	if got := done.CompletionTokens; got < 1 || got >= 3000 {
		t.Errorf("done completion_tokens = %d, want some but not all of 3000", got)
	}
	if err := waitRun(ag.res); err != nil {
		t.Fatalf("Run after a drain deadline: %v", err)
	}
	ag.stop()
	testenv.Eventually(t, "engine aborts the request", func() bool { return sim.Stats().Running == 0 })
}

// TestHalfOpenLinkRedials: a server that stops answering pings without
// closing the link (gone behind a NAT, a dead replica's half-open socket)
// is dropped after the pong timeout, and the agent dials again.
func TestHalfOpenLinkRedials(t *testing.T) {
	_, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{silent: true})
	startAgent(t, fs, eng, func(c *Config) { c.pingEvery, c.pongWithin = 50*time.Millisecond, 200*time.Millisecond })
	first := fs.accept(t)
	second := fs.accept(t)
	if got, want := second.register.NodeID, first.register.NodeID; got != want {
		t.Errorf("second register node_id = %q, want %q", got, want)
	}
}

// TestSelfDrain: Agent.Drain (the process got SIGTERM: its pod is going
// away) tells the server at once in a heartbeat that says draining,
// refuses new work, lets the in-flight request finish, and Run returns.
func TestSelfDrain(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	ag := startAgent(t, fs, eng)
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-s1", testModel, sim.ServedModelName(), 400))
	if _, ok := sc.next(t).(*nodeproto.Chunk); !ok {
		t.Fatal("first answer is not a chunk")
	}
	ag.a.Drain(0)
	var beat, refused, done bool
	for !beat || !refused || !done {
		switch f := sc.nextAny(t).(type) {
		case *nodeproto.Heartbeat:
			if f.Draining && !beat {
				beat = true
				// Told: new work is refused from now on.
				sc.send(t, assignFrame("req-s2", testModel, sim.ServedModelName(), 8))
			}
		case *nodeproto.Chunk:
		case *nodeproto.Error:
			refused = f.RequestID == "req-s2" && f.Status == http.StatusServiceUnavailable
			if !refused {
				t.Fatalf("error %+v, want req-s2 refused with 503", f)
			}
		case *nodeproto.Done:
			if f.RequestID != "req-s1" || f.FinishReason != openai.FinishLength || f.CompletionTokens != 400 {
				t.Fatalf("done %+v, want req-s1 finished whole", f)
			}
			done = true
		default:
			t.Fatalf("unexpected %s frame", f.Type())
		}
	}
	if err := waitRun(ag.res); err != nil {
		t.Fatalf("Run after the self-drain: %v", err)
	}
	ag.stop()
}

// TestSelfDrainWhileDisconnected: told to drain while it cannot reach the
// server (its orchestrator is gone too, as at the end of a shutdown), the
// agent does not keep redialing until the drain timeout: nothing runs on
// a node without a link, so Run returns.
func TestSelfDrainWhileDisconnected(t *testing.T) {
	_, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	ag := startAgent(t, fs, eng, func(c *Config) { c.ServerURL = "ws://127.0.0.1:1/v1/nodes/connect" })
	ag.a.Drain(time.Hour)
	if err := waitRun(ag.res); err != nil {
		t.Fatalf("Run after a drain while disconnected: %v", err)
	}
	ag.stop()
}
