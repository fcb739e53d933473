package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"

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
	ws     *websocket.Conn
	rec    registry.NodeRecord
	epoch  int64
	token  nodeproto.Secret     // checked again every TokenRecheckInterval
	out    chan nodeproto.Frame // to the writer; see writeQueue
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	sinks    map[string]sink // requests running on the node
	draining bool            // drain sent: no new work
	leaving  bool            // superseded, revoked or shutting down: no new work
	closed   bool            // the connection ended
	idle     chan struct{}   // closed once leaving with no requests
	idleOnce sync.Once
	why      error // why the connection is leaving: its close cause once idle

	// engineDown is the last beat's engine_down; the read loop's alone.
	engineDown string
}

func newNodeConn(o *Orchestrator, ws *websocket.Conn, rec registry.NodeRecord, epoch int64, token nodeproto.Secret, cancel context.CancelCauseFunc) *nodeConn {
	return &nodeConn{
		o: o, ws: ws, rec: rec, epoch: epoch, token: token, cancel: cancel,
		out:   make(chan nodeproto.Frame, writeQueue),
		sinks: make(map[string]sink),
		idle:  make(chan struct{}),
	}
}

// send queues f for the writer. A full queue means the socket is stuck,
// and the connection is dropped rather than letting senders wait.
func (c *nodeConn) send(f nodeproto.Frame) {
	select {
	case c.out <- f:
	default:
		c.cancel(errWriteQueueFull)
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
	c.checkIdle()
	c.mu.Unlock()
}

// take returns a request's sink; end also forgets it.
func (c *nodeConn) take(requestID string, end bool) sink {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sinks[requestID]
	if end && s != nil {
		delete(c.sinks, requestID)
		c.checkIdle()
	}
	return s
}

// checkIdle closes idle once a leaving connection has no requests. The
// caller holds mu.
func (c *nodeConn) checkIdle() {
	if c.leaving && len(c.sinks) == 0 {
		c.idleOnce.Do(func() { close(c.idle) })
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

// serve runs the connection until it breaks, ctx ends or it is cancelled,
// then fails every request still on it.
func (c *nodeConn) serve(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		c.cancel(c.writeLoop(ctx))
	}()
	go func() {
		defer wg.Done()
		c.cancel(c.readLoop(ctx))
	}()
	go func() {
		defer wg.Done()
		c.keepAlive(ctx)
	}()
	select {
	case <-ctx.Done():
	case <-c.idle:
		c.mu.Lock()
		why := c.why
		c.mu.Unlock()
		c.cancel(why)
	}
	err := context.Cause(ctx)
	c.closeWith(err)
	wg.Wait()
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
	code, reason := websocket.StatusInternalError, "server error"
	switch {
	case errors.Is(err, errRevoked):
		code, reason = websocket.StatusPolicyViolation, "node token revoked"
	case errors.Is(err, errShutdown):
		code, reason = websocket.StatusGoingAway, "replica going away"
	case errors.Is(err, errSuperseded):
		code, reason = websocket.StatusCode(nodeproto.CloseSuperseded), "superseded"
	case errors.Is(err, errNodeClosed):
		code, reason = websocket.StatusNormalClosure, "bye"
	default:
		if cc, ok := nodeproto.CloseCodeOf(err); ok {
			code, reason = websocket.StatusCode(cc), "protocol error"
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

// writeLoop is the socket's only writer.
func (c *nodeConn) writeLoop(ctx context.Context) error {
	for {
		var f nodeproto.Frame
		select {
		case <-ctx.Done():
			return nil
		case f = <-c.out:
		}
		b, err := nodeproto.Encode(f)
		if err != nil {
			c.o.cfg.Logger.Error("drop unencodable frame", "node_id", c.rec.ID, "type", f.Type(), "err", err)
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, nodeproto.WriteTimeout)
		err = c.ws.Write(wctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			return fmt.Errorf("write %s: %w", f.Type(), err)
		}
	}
}

// keepAlive pings the node and checks its token again now and then, until
// ctx ends. A ping that goes unanswered for ReadTimeout ends the link.
func (c *nodeConn) keepAlive(ctx context.Context) {
	ping := time.NewTicker(nodeproto.PingInterval)
	defer ping.Stop()
	recheck := time.NewTicker(TokenRecheckInterval)
	defer recheck.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			pctx, cancel := context.WithTimeout(ctx, nodeproto.ReadTimeout)
			err := c.ws.Ping(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				c.cancel(fmt.Errorf("ping: %w", err))
				return
			}
		case <-recheck.C:
			c.o.recheckToken(ctx, c)
		}
	}
}
