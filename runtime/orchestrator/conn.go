package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/llmplat/llmplat/runtime/hoptrace"
	"github.com/llmplat/llmplat/runtime/wsconn"

	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/registry"
)

// Why a connection ended, as the cause of its context.
var (
	errWriteQueueFull = errors.New("write queue full")
	errRevoked        = errors.New("node token revoked")
	errShutdown       = errors.New("replica going away")
	errSuperseded     = errors.New("superseded by a newer connection")
)

// nodeConn is one registered node socket on this replica.
type nodeConn struct {
	o      *Orchestrator
	ws     *wsconn.Conn
	rec    registry.NodeRecord
	epoch  int64
	token  nodeproto.Secret // checked again every TokenRecheckInterval
	cancel context.CancelCauseFunc

	// queue holds the frames for the writer, at most writeQueue; wake
	// tells it there are some. An idle socket holds no queue at all.
	qmu   sync.Mutex
	queue []nodeproto.Frame
	wake  chan struct{}

	mu    sync.Mutex
	sinks map[string]sink // requests running on the node
	// unheard are the requests in sinks the node has sent nothing for.
	unheard  map[string]struct{}
	draining bool // drain sent: no new work
	leaving  bool // superseded, revoked or shutting down: no new work
	closed   bool // the connection ended
	idleOnce sync.Once
	why      error // why the connection is leaving: its close cause once idle

	// engineDown is the last beat's engine_down; the read loop's alone.
	engineDown string
	// heard is when the read loop last read a frame (Unix nanoseconds).
	heard atomic.Int64
}

func newNodeConn(o *Orchestrator, ws *wsconn.Conn, rec registry.NodeRecord, epoch int64, token nodeproto.Secret, cancel context.CancelCauseFunc) *nodeConn {
	return &nodeConn{
		o: o, ws: ws, rec: rec, epoch: epoch, token: token, cancel: cancel,
		wake:  make(chan struct{}, 1),
		sinks: make(map[string]sink), unheard: make(map[string]struct{}),
	}
}

// send queues f for the writer. A full queue means the socket is stuck,
// and the connection is dropped rather than letting senders wait.
func (c *nodeConn) send(f nodeproto.Frame) {
	c.qmu.Lock()
	full := len(c.queue) >= writeQueue
	if !full {
		c.queue = append(c.queue, f)
	}
	c.qmu.Unlock()
	if full {
		c.cancel(errWriteQueueFull)
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// accepting reports whether the node may get new work. The caller holds mu.
func (c *nodeConn) accepting() bool {
	return !c.draining && !c.leaving && !c.closed
}

// assign starts a request on the node; its frames go to s. It fails with
// errLost when the connection takes no new work.
func (c *nodeConn) assign(a *nodeproto.Assign, s sink) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.accepting() {
		return fmt.Errorf("%w: node %s takes no new work", errLost, c.rec.ID)
	}
	if _, dup := c.sinks[a.RequestID]; dup {
		return fmt.Errorf("%w: request %s already runs on node %s", errLost, a.RequestID, c.rec.ID)
	}
	c.sinks[a.RequestID] = s
	c.unheard[a.RequestID] = struct{}{}
	c.o.recordAssigned(c.rec.ID, a.RequestID) // ahead of any done of it
	c.send(a)
	return nil
}

// grant implements link.
func (c *nodeConn) grant(requestID string, chunks int) {
	c.send(&nodeproto.Window{RequestID: requestID, Chunks: chunks})
}

// abort implements link: the node aborts the request and answers done,
// which finds no sink and is only acknowledged.
func (c *nodeConn) abort(requestID, reason string) {
	c.forget(requestID)
	c.send(&nodeproto.Cancel{RequestID: requestID, Reason: reason})
}

// forget drops a request's sink.
func (c *nodeConn) forget(requestID string) {
	c.mu.Lock()
	delete(c.sinks, requestID)
	delete(c.unheard, requestID)
	c.checkIdle()
	c.mu.Unlock()
}

// take returns a request's sink; end also forgets it.
func (c *nodeConn) take(requestID string, end bool) sink {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sinks[requestID]
	if len(c.unheard) > 0 {
		delete(c.unheard, requestID)
	}
	if end && s != nil {
		delete(c.sinks, requestID)
		c.checkIdle()
	}
	return s
}

// silentAfter is how long a node may send nothing before the requests
// it has sent nothing for are taken back: two heartbeat intervals, after
// which the router already leaves the node out (registry.HealthyWithin;
// docs/requirements.md: a node leaves routing after 2 missed heartbeats, and
// a request that streamed nothing is retried once elsewhere). The socket itself lives until ReadTimeout, so a
// node that speaks again keeps the streams it had started.
const silentAfter = registry.HealthyWithin

// watchSilence takes back the requests the node has sent nothing for once
// it has been silent for silentAfter, until ctx ends. The read loop only
// stamps heard: the timer is re-armed when it fires, not per frame. The
// check runs on a goroutine of its own, as a fake clock calls the timer's
// function under its lock.
func (c *nodeConn) watchSilence(ctx context.Context) {
	clk := c.o.cfg.Clock
	c.heard.Store(clk.Now().UnixNano())
	var timer atomic.Pointer[clock.Timer]
	check := func() {
		if ctx.Err() != nil {
			return
		}
		if quiet := clk.Since(time.Unix(0, c.heard.Load())); quiet < silentAfter {
			(*timer.Load()).Reset(silentAfter - quiet)
			return
		}
		c.takeBackUnheard()
		(*timer.Load()).Reset(silentAfter)
	}
	t := clk.AfterFunc(silentAfter, func() { go check() })
	timer.Store(&t)
	context.AfterFunc(ctx, func() { (*timer.Load()).Stop() })
}

// takeBackUnheard fails, as lost, every request the node has sent
// nothing for, so that each is retried once on another node, and cancels
// them on the node in case it wakes.
func (c *nodeConn) takeBackUnheard() {
	c.mu.Lock()
	lost := make([]sink, 0, len(c.unheard))
	ids := make([]string, 0, len(c.unheard))
	for id := range c.unheard {
		if s, ok := c.sinks[id]; ok {
			lost, ids = append(lost, s), append(ids, id)
			delete(c.sinks, id)
		}
		delete(c.unheard, id)
	}
	c.checkIdle()
	c.mu.Unlock()
	if len(lost) == 0 {
		return
	}
	c.o.cfg.Logger.Warn("node silent for two heartbeat intervals: its requests that streamed nothing are retried elsewhere",
		"node_id", c.rec.ID, "requests", len(lost))
	for i, s := range lost {
		c.send(&nodeproto.Cancel{RequestID: ids[i], Reason: "node_silent"})
		s.fail(fmt.Errorf("%w: node %s silent for %v", errLost, c.rec.ID, silentAfter))
	}
}

// checkIdle closes idle once a leaving connection has no requests. The
// caller holds mu.
func (c *nodeConn) checkIdle() {
	if c.leaving && len(c.sinks) == 0 {
		// The last request of a leaving connection ended: it closes now,
		// with the reason it is leaving.
		c.idleOnce.Do(func() { c.cancel(c.why) })
	}
}

// leave stops new work on the connection; it ends with why once idle.
func (c *nodeConn) leave(why error) {
	c.mu.Lock()
	if !c.leaving {
		c.leaving, c.why = true, why
	}
	c.checkIdle()
	c.mu.Unlock()
}

// drain stops new work and tells the node, which finishes its requests
// and closes the socket.
func (c *nodeConn) drain(deadline time.Duration) {
	c.mu.Lock()
	already := c.draining
	c.draining = true
	c.mu.Unlock()
	if !already {
		c.send(&nodeproto.Drain{DeadlineMS: deadline.Milliseconds()})
	}
}

// serve runs the connection until it breaks, ctx ends or it is cancelled
// (a leaving connection cancels itself once idle), then fails every
// request still on it. Three goroutines a socket, the caller's reading,
// one writing (pings included) and one re-checking the token, keep a
// thousand idle nodes cheap.
func (c *nodeConn) serve(ctx context.Context) error {
	written, rechecked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(written)
		c.cancel(c.writeLoop(ctx))
	}()
	go func() {
		defer close(rechecked)
		c.recheckLoop(ctx)
	}()
	// The close frame goes out as soon as the connection ends, whichever
	// loop ended it; the read loop sees the peer's answer or its deadline.
	stop := context.AfterFunc(ctx, func() { c.closeWith(context.Cause(ctx)) })
	defer stop()
	c.cancel(c.readLoop(ctx))
	<-written
	<-rechecked
	err := context.Cause(ctx)
	c.mu.Lock()
	c.closed = true
	sinks := c.sinks
	c.sinks = map[string]sink{}
	c.mu.Unlock()
	for _, s := range sinks {
		s.fail(fmt.Errorf("%w: %w: node %s: %v", errLost, errGone, c.rec.ID, err))
	}
	return err
}

// closeWith closes the socket with the close code its end calls for.
func (c *nodeConn) closeWith(err error) {
	code, reason := wsconn.StatusInternalError, "server error"
	switch {
	case errors.Is(err, errRevoked):
		code, reason = wsconn.StatusPolicyViolation, "node token revoked"
	case errors.Is(err, errShutdown):
		code, reason = wsconn.StatusGoingAway, "replica going away"
	case errors.Is(err, errSuperseded):
		code, reason = wsconn.StatusCode(nodeproto.CloseSuperseded), "superseded"
	case errors.Is(err, errNodeClosed):
		code, reason = wsconn.StatusNormalClosure, "bye"
	default:
		if cc, ok := nodeproto.CloseCodeOf(err); ok {
			code, reason = wsconn.StatusCode(cc), "protocol error"
		}
	}
	// Close writes the close frame and waits briefly for the peer's; the
	// loops see the closed socket and end.
	go func() { _ = c.ws.Close(code, reason) }()
	time.AfterFunc(closeWait, func() { _ = c.ws.CloseNow() })
}

// closeWait bounds the close handshake: a peer that does not answer the
// close frame in 2 s has its socket torn down.
const closeWait = 2 * time.Second

// errNodeClosed means the node closed the socket itself.
var errNodeClosed = errors.New("node closed the connection")

// recheckLoop checks the node's token again every TokenRecheckInterval
// until ctx ends; a revoked token closes the connection. It runs apart
// from the writer, so a slow database never holds the node's frames.
func (c *nodeConn) recheckLoop(ctx context.Context) {
	t := c.o.cfg.Clock.NewTicker(TokenRecheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		rctx, cancel := context.WithTimeout(ctx, tokenRecheckTimeout)
		c.o.recheckToken(rctx, c)
		cancel()
	}
}

// writeLoop is the socket's only writer of frames. It also pings the node
// every PingInterval (the node's heartbeats, due every 5 s, are what the
// read deadline waits for: a half-open link ends there).
func (c *nodeConn) writeLoop(ctx context.Context) error {
	ping := c.o.cfg.Clock.NewTicker(nodeproto.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ping.C():
			if err := c.ws.SendPing(nodeproto.WriteTimeout); err != nil {
				return fmt.Errorf("ping: %w", err)
			}
			continue
		case <-c.wake:
		}
		c.qmu.Lock()
		frames := c.queue
		c.queue = nil
		c.qmu.Unlock()
		for len(frames) > 0 {
			n := min(len(frames), maxWriteBatch)
			if err := c.write(ctx, frames[:n]...); err != nil {
				return err
			}
			frames = frames[n:]
		}
	}
}

// maxWriteBatch bounds the frames one socket write carries: a batch is
// encoded whole before it is written.
const maxWriteBatch = 64

// write encodes frames and sends them in one socket write, within
// WriteTimeout. A frame that cannot be encoded is logged and dropped.
func (c *nodeConn) write(ctx context.Context, frames ...nodeproto.Frame) error {
	msgs := make([][]byte, 0, len(frames))
	for _, f := range frames {
		b, err := nodeproto.Encode(f)
		if err != nil {
			c.o.cfg.Logger.Error("drop unencodable frame", "node_id", c.rec.ID, "type", f.Type(), "err", err)
			continue
		}
		msgs = append(msgs, b)
	}
	if len(msgs) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, nodeproto.WriteTimeout)
	defer cancel()
	if err := c.ws.WriteBatch(wctx, msgs); err != nil {
		return fmt.Errorf("write %s: %w", frames[0].Type(), err)
	}
	if hoptrace.On {
		for _, f := range frames {
			if a, ok := f.(*nodeproto.Assign); ok {
				hoptrace.Mark(a.RequestID, hoptrace.AssignWritten)
			}
		}
	}
	return nil
}
