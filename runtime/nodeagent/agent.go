package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmplat/llmplat/runtime/wsconn"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// dialTimeout bounds the WebSocket handshake: a server that cannot upgrade
// in 10 s is down, and the backoff should take over.
const dialTimeout = 10 * time.Second

// ErrAlreadyRunning is returned by Run when the agent already runs.
var ErrAlreadyRunning = errors.New("nodeagent: already running")

// Agent connects one engine to the orchestrator.
type Agent struct {
	cfg     Config
	running atomic.Bool
	// dones keeps done records until acknowledged, across connections.
	dones *doneStore
	// clog is the completion log while Run runs; nil when none is set.
	clog *completionLog
	// live is the newest welcomed connection, which takes the done records
	// of older ones that ended.
	live atomic.Pointer[session]
	// selfDrain is set once Drain was called: every connection from then
	// on drains at once, with what is left of selfDrainBy.
	selfDrain   atomic.Bool
	selfDrainBy atomic.Int64 // unix nanoseconds; 0: no deadline
	// draining is closed by the first Drain: Run stops waiting to redial.
	draining  chan struct{}
	drainOnce sync.Once
}

// Drain makes the node leave on its own, as a pod that is being stopped
// does: the agent takes no new work, tells the server at once (its next
// heartbeat says draining, and is sent now), lets in-flight requests
// finish — cancelling those still running after deadline, when positive —
// and Run returns once the connection has drained. It is safe to call at
// any time, and more than once (the earliest deadline holds).
func (a *Agent) Drain(deadline time.Duration) {
	if deadline > 0 {
		by := a.cfg.Clock.Now().Add(deadline).UnixNano()
		if cur := a.selfDrainBy.Load(); cur == 0 || by < cur {
			a.selfDrainBy.Store(by)
		}
	}
	a.selfDrain.Store(true)
	a.drainOnce.Do(func() { close(a.draining) })
	if s := a.live.Load(); s != nil {
		s.selfDrain()
	}
}

// drainLeft is what is left of the self-drain's deadline: 0 for none, and
// at least a millisecond once it is set (a passed deadline cancels at once).
func (a *Agent) drainLeft() time.Duration {
	by := a.selfDrainBy.Load()
	if by == 0 {
		return 0
	}
	return max(time.Unix(0, by).Sub(a.cfg.Clock.Now()), time.Millisecond)
}

// New returns an agent for cfg after validating it.
func New(cfg Config) (*Agent, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dones, err := newDoneStore(maxPendingDones)
	if err != nil {
		return nil, err
	}
	return &Agent{cfg: c, dones: dones, draining: make(chan struct{})}, nil
}

// Stats are an agent's done-record counts.
type Stats struct {
	// PendingDones are done records not yet acknowledged by a server.
	PendingDones int
	// DroppedDones counts records dropped unacknowledged at the cap of
	// 10,000; the completion log still has them.
	DroppedDones int64
}

// Stats returns the agent's done-record counts.
func (a *Agent) Stats() Stats {
	p, d := a.dones.counts()
	return Stats{PendingDones: p, DroppedDones: d}
}

// outcome is how one connection ended, for the dial loop.
type outcome struct {
	// upFor is how long the link served after welcome; 0 if it never did.
	upFor time.Duration
	// advice is the server's wait before the next dial (retry_after, the
	// cap after a refusal); 0 means none.
	advice time.Duration
	// redial means dial again after exactly advice (reconnect), without a
	// backoff draw.
	redial bool
	// drained means the node drained: Run returns.
	drained bool
}

// Run connects, serves and reconnects until ctx ends or the server drains
// the node; both return nil. After a reconnect frame the old connection
// finishes its in-flight requests in the background while Run dials the
// new one; Run waits for it before returning. It fails only when the
// completion log cannot be opened.
func (a *Agent) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer a.running.Store(false)
	// Streams have ended when Run returns; the pooled engine connections
	// go with them.
	defer a.cfg.HTTPClient.CloseIdleConnections()
	clog, err := openCompletionLog(a.cfg.CompletionLog, a.cfg.Clock)
	if err != nil {
		return err
	}
	a.clog = clog
	defer func() {
		if err := clog.close(); err != nil {
			a.cfg.Logger.Error("close completion log", "err", err)
		}
	}()
	bo := nodeproto.NewBackoff(a.cfg.Rand)
	var old sync.WaitGroup
	defer old.Wait()
	for {
		out, err := a.connectOrRedial(ctx, &old)
		if ctx.Err() != nil || out.drained || a.selfDrain.Load() {
			// Draining itself, the node does not come back: a link that
			// ended took its requests with it, so nothing is left to wait for.
			return nil
		}
		var wait time.Duration
		if out.redial {
			bo.Reset() // the server asked: nothing is failing
			wait = out.advice
		} else {
			bo.ResetIfStable(out.upFor)
			bo.Advise(out.advice)
			wait = bo.Next()
		}
		a.cfg.Logger.Warn("node link ended", "err", err, "retry_in", wait)
		t := a.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-a.draining: // told to leave while not connected
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// result is how a connection ended.
type result struct {
	out outcome
	err error
}

// connectOrRedial serves one connection until it ends, or until the server
// asks for a new one; the old connection then goes on under old.
func (a *Agent) connectOrRedial(ctx context.Context, old *sync.WaitGroup) (outcome, error) {
	redial := make(chan time.Duration, 1) // one reconnect per connection counts
	res := make(chan result, 1)           // the connection's end, read once
	go func() {
		out, err := a.connect(ctx, redial)
		res <- result{out, err}
	}()
	select {
	case r := <-res:
		return r.out, r.err
	case after := <-redial:
		old.Add(1)
		go func() {
			defer old.Done()
			if r := <-res; r.err != nil {
				a.cfg.Logger.Warn("old node link ended", "err", r.err)
			}
		}()
		return outcome{advice: after, redial: true}, nil
	}
}

// connect dials, registers and serves one connection.
// A reconnect frame's wait is sent on redial.
func (a *Agent) connect(ctx context.Context, redial chan<- time.Duration) (outcome, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	conn, err := wsconn.Dial(dctx, a.cfg.ServerURL)
	cancel()
	if err != nil {
		return outcome{}, fmt.Errorf("dial: %w", err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(nodeproto.AgentReadLimit)
	w, out, err := a.handshake(ctx, conn)
	if w == nil {
		return out, err
	}
	a.cfg.Logger.Info("node registered", "epoch", w.Epoch, "orchestrator", w.OrchestratorID)
	start := a.cfg.Clock.Now()
	s := newSession(a, conn, w, redial)
	out, err = s.serve(ctx)
	out.upFor = a.cfg.Clock.Since(start)
	return out, err
}

// handshake sends register and reads the server's answer. It returns the
// welcome, or nil with the outcome the server's refusal calls for.
func (a *Agent) handshake(ctx context.Context, conn *wsconn.Conn) (*nodeproto.Welcome, outcome, error) {
	b, err := nodeproto.Encode(a.cfg.register())
	if err != nil {
		return nil, outcome{}, fmt.Errorf("encode register: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, nodeproto.WriteTimeout)
	err = conn.Write(wctx, b)
	cancel()
	if err != nil {
		return nil, outcome{}, fmt.Errorf("send register: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, nodeproto.RegisterTimeout)
	msg, err := conn.Read(rctx)
	cancel()
	if err != nil {
		return nil, adviceForClose(err), fmt.Errorf("read welcome: %w", err)
	}
	f, err := nodeproto.Decode(msg)
	if err != nil {
		if errors.Is(err, nodeproto.ErrVersion) {
			return nil, outcome{advice: nodeproto.BackoffCap}, fmt.Errorf("read welcome: %w", err)
		}
		return nil, outcome{}, fmt.Errorf("read welcome: %w", err)
	}
	switch f := f.(type) {
	case *nodeproto.Welcome:
		return f, outcome{}, nil
	case *nodeproto.RetryAfter:
		return nil, outcome{advice: f.Wait()}, fmt.Errorf("server asked to retry after %s: %s", f.Wait(), f.Reason)
	case *nodeproto.Error:
		return nil, outcome{advice: nodeproto.BackoffCap}, fmt.Errorf("server refused registration: %d %s", f.Status, f.Message)
	}
	return nil, outcome{}, fmt.Errorf("read welcome: unexpected %s frame", f.Type())
}

// adviceForClose returns the cap after a close that says the server will
// not take this agent as it is (policy, protocol version).
func adviceForClose(err error) outcome {
	switch wsconn.CloseStatus(err) {
	case wsconn.StatusPolicyViolation, wsconn.StatusProtocolError:
		return outcome{advice: nodeproto.BackoffCap}
	}
	return outcome{}
}
