package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// outQueue is the writer's queue: it absorbs a burst of chunks from
// concurrent streams while one frame is written. When it is full, senders
// wait (backpressure onto the engine streams) until the write deadline
// ends a stuck connection.
const outQueue = 64

// session is one registered connection.
type session struct {
	a    *Agent
	conn *websocket.Conn
	w    *nodeproto.Welcome
	// out carries every outgoing frame to the one writer; a nil frame
	// asks the writer to close the socket normally after what precedes it.
	out chan nodeproto.Frame

	// redial receives a reconnect frame's wait, at most once.
	redial chan<- time.Duration

	mu       sync.Mutex
	reqs     map[string]context.CancelFunc // in-flight requests by id
	draining bool                          // the server drained the node
	leaving  bool                          // the server asked for a new connection
	drained  chan struct{}                 // closed once draining or leaving with nothing in flight
	once     sync.Once
	advice   time.Duration // the server's wait before the next dial, 0 for none
	after    time.Duration // the reconnect frame's wait, once leaving
	wg       sync.WaitGroup
}

func newSession(a *Agent, conn *websocket.Conn, w *nodeproto.Welcome, redial chan<- time.Duration) *session {
	return &session{
		a: a, conn: conn, w: w, redial: redial,
		out:     make(chan nodeproto.Frame, outQueue),
		reqs:    make(map[string]context.CancelFunc),
		drained: make(chan struct{}),
	}
}

// serve runs the connection until it breaks, ctx ends or a drain
// completes. Every goroutine it starts has ended when it returns.
func (s *session) serve(ctx context.Context) (outcome, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		cancel(s.writeLoop(sctx))
	}()
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		cancel(s.readLoop(sctx))
	}()
	go func() {
		defer s.wg.Done()
		s.heartbeatLoop(sctx)
	}()
	var out outcome
	select {
	case <-s.drained:
		out.drained = true
		s.send(sctx, nil) // flush queued frames, then close normally
		select {
		case <-writerDone:
		case <-sctx.Done():
		}
	case <-sctx.Done():
	}
	err := context.Cause(sctx)
	cancel(errors.New("session over"))
	s.wg.Wait()
	<-writerDone
	s.mu.Lock()
	leaving := s.leaving
	out.advice = max(s.advice, adviceForClose(err).advice)
	if leaving {
		// Run has dialled (or will dial) the new connection; this one ends.
		out = outcome{upFor: out.upFor, advice: s.after, redial: true}
	}
	s.mu.Unlock()
	if out.drained || leaving {
		return out, nil
	}
	return out, err
}

// send hands f to the writer, or gives up when the connection ends.
func (s *session) send(ctx context.Context, f nodeproto.Frame) bool {
	select {
	case s.out <- f:
		return true
	case <-ctx.Done():
		return false
	}
}

// writeLoop is the socket's only writer. A nil frame closes the socket
// normally; any write error ends the connection.
func (s *session) writeLoop(ctx context.Context) error {
	for {
		var f nodeproto.Frame
		select {
		case <-ctx.Done():
			return nil
		case f = <-s.out:
		}
		if f == nil {
			return s.conn.Close(websocket.StatusNormalClosure, "drained")
		}
		b, err := nodeproto.Encode(f)
		if err != nil {
			s.a.cfg.Logger.Error("drop unencodable frame", "type", f.Type(), "err", err)
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, nodeproto.WriteTimeout)
		err = s.conn.Write(wctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			return fmt.Errorf("write %s: %w", f.Type(), err)
		}
	}
}

// readLoop reads and dispatches server frames until the connection ends.
// Cancelling ctx closes the socket, which is how the loop is stopped.
func (s *session) readLoop(ctx context.Context) error {
	for {
		_, msg, err := s.conn.Read(ctx)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		f, err := nodeproto.Decode(msg)
		if errors.Is(err, nodeproto.ErrUnknownType) {
			continue
		}
		if err != nil {
			if code, ok := nodeproto.CloseCodeOf(err); ok {
				s.conn.Close(websocket.StatusCode(code), "bad frame")
			}
			return fmt.Errorf("decode: %w", err)
		}
		s.handle(ctx, f)
	}
}

// handle acts on one server frame.
func (s *session) handle(ctx context.Context, f nodeproto.Frame) {
	switch f := f.(type) {
	case *nodeproto.Assign:
		s.assign(ctx, f)
	case *nodeproto.Cancel:
		s.mu.Lock()
		cancel := s.reqs[f.RequestID]
		s.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	case *nodeproto.Drain:
		s.mu.Lock()
		s.draining = true
		s.checkDrained()
		s.mu.Unlock()
	case *nodeproto.Reconnect:
		s.mu.Lock()
		if !s.leaving {
			s.leaving = true // this socket takes no new work; in-flight ends here
			s.after = f.After()
			s.redial <- f.After()
		}
		s.checkDrained()
		s.mu.Unlock()
	case *nodeproto.RetryAfter:
		s.mu.Lock()
		s.advice = max(s.advice, f.Wait())
		s.mu.Unlock()
	case *nodeproto.Error:
		s.a.cfg.Logger.Error("server reported a connection error", "status", f.Status, "message", f.Message)
		s.mu.Lock()
		s.advice = nodeproto.BackoffCap
		s.mu.Unlock()
	case *nodeproto.LoadModel:
		s.send(ctx, &nodeproto.Error{Status: 501, Message: "no model loader configured"})
	case *nodeproto.Window, *nodeproto.Ack:
		// Credit and done replay are not implemented yet.
	default:
		s.a.cfg.Logger.Warn("unexpected frame", "type", f.Type())
	}
}

// checkDrained closes drained once draining with nothing in flight. The
// caller holds mu.
func (s *session) checkDrained() {
	if (s.draining || s.leaving) && len(s.reqs) == 0 {
		s.once.Do(func() { close(s.drained) })
	}
}
