package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/utils/clock"
	"sync"
	"time"

	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/hoptrace"
	"github.com/llmplat/llmplat/runtime/wsconn"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// outQueue is the writer's queue: it absorbs a burst of chunks from
// concurrent streams while one frame is written. When it is full, senders
// wait (backpressure onto the engine streams) until the write deadline
// ends a stuck connection.
const outQueue = 64

// drainAckWait bounds how long a drained agent waits for the server to
// acknowledge its last done records before it closes: an ack follows a
// done within a round trip, and the completion log keeps them past it.
const drainAckWait = 5 * time.Second

// ackPoll is how often a drained agent looks for those acks.
const ackPoll = 20 * time.Millisecond

// session is one registered connection.
type session struct {
	a    *Agent
	conn *wsconn.Conn
	w    *nodeproto.Welcome
	// out carries every outgoing frame to the one writer; a nil frame
	// asks the writer to close the socket normally after what precedes it.
	out chan nodeproto.Frame
	// over is closed when the connection has ended, for senders of other
	// connections that hand it done records.
	over chan struct{}

	// redial receives a reconnect frame's wait, at most once.
	redial chan<- time.Duration

	mu         sync.Mutex
	reqs       map[string]*inflight // in-flight requests by id
	draining   bool                 // the server drained the node
	leaving    bool                 // the server asked for a new connection
	drained    chan struct{}        // closed once draining or leaving with nothing in flight
	once       sync.Once
	advice     time.Duration // the server's wait before the next dial, 0 for none
	after      time.Duration // the reconnect frame's wait, once leaving
	drainTimer clock.Timer   // cancels what still runs at a drain's deadline
	drainAt    time.Time     // when drainTimer fires
	wg         sync.WaitGroup
	// beatNow asks the heartbeat loop for a beat now; size 1, so
	// requests failing together ask once.
	beatNow chan struct{}
}

// inflight is one running request.
type inflight struct {
	cancel context.CancelCauseFunc
	credit *credit
}

func newSession(a *Agent, conn *wsconn.Conn, w *nodeproto.Welcome, redial chan<- time.Duration) *session {
	return &session{
		a: a, conn: conn, w: w, redial: redial,
		out:     make(chan nodeproto.Frame, outQueue),
		over:    make(chan struct{}),
		reqs:    make(map[string]*inflight),
		drained: make(chan struct{}),
		beatNow: make(chan struct{}, 1),
	}
}

// serve runs the connection until it breaks, ctx ends or a drain
// completes. Every goroutine it starts has ended when it returns. The
// done records no server has acknowledged go out first, before any other
// frame of this connection.
func (s *session) serve(ctx context.Context) (outcome, error) {
	replay := s.a.dones.snapshot() // before any request of this connection can finish
	s.a.live.Store(s)
	defer s.a.live.CompareAndSwap(s, nil)
	if s.a.selfDrain.Load() {
		s.selfDrain() // a connection made while the node leaves leaves too
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		cancel(s.writeLoop(sctx, replay))
	}()
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		cancel(s.readLoop(sctx))
	}()
	go func() {
		defer s.wg.Done()
		if err := s.pingLoop(sctx); err != nil {
			cancel(err)
		}
	}()
	go func() {
		defer s.wg.Done()
		s.heartbeatLoop(sctx)
	}()
	var out outcome
	select {
	case <-s.drained:
		out.drained = true
		s.awaitAcks(sctx)
		s.send(sctx, nil) // flush queued frames, then close normally
		select {
		case <-writerDone:
		case <-sctx.Done():
		}
	case <-sctx.Done():
	}
	err := context.Cause(sctx)
	cancel(errSessionOver)
	close(s.over)
	s.wg.Wait()
	<-writerDone
	s.mu.Lock()
	if s.drainTimer != nil {
		s.drainTimer.Stop()
	}
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

// errSessionOver ends a session's context once serve is done with it.
var errSessionOver = errors.New("session over")

// awaitAcks waits, up to drainAckWait, until no done record waits for an
// ack, so a drained node leaves nothing unconfirmed behind.
func (s *session) awaitAcks(ctx context.Context) {
	deadline := s.a.cfg.Clock.NewTimer(drainAckWait)
	defer deadline.Stop()
	tick := s.a.cfg.Clock.NewTicker(ackPoll)
	defer tick.Stop()
	for s.a.Stats().PendingDones > 0 {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C():
			s.a.cfg.Logger.Warn("drained with done records unacknowledged", "pending", s.a.Stats().PendingDones)
			return
		case <-tick.C():
		}
	}
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

// offer hands a done record of an older connection to this one's writer,
// or gives up when this connection has ended too: the record stays in the
// store for the next replay either way.
func (s *session) offer(d *nodeproto.Done) {
	select {
	case s.out <- d:
	case <-s.over:
	}
}

// writeLoop is the socket's only writer. It writes the replayed done
// records first, then the queue. A nil frame closes the socket normally;
// any write error ends the connection.
func (s *session) writeLoop(ctx context.Context, replay []*nodeproto.Done) error {
	if len(replay) > 0 {
		s.a.cfg.Logger.Info("replaying unacknowledged done records", "count", len(replay))
	}
	for len(replay) > 0 {
		n := min(len(replay), maxWriteBatch)
		frames := make([]nodeproto.Frame, n)
		for i, d := range replay[:n] {
			frames[i] = d
		}
		if err := s.write(ctx, frames...); err != nil {
			return err
		}
		replay = replay[n:]
	}
	batch := make([]nodeproto.Frame, 0, maxWriteBatch)
	for {
		var f nodeproto.Frame
		select {
		case <-ctx.Done():
			return nil
		case f = <-s.out:
		}
		// Whatever else is queued goes out in the same write.
		batch = append(batch[:0], f)
	more:
		for f != nil && len(batch) < maxWriteBatch {
			select {
			case f = <-s.out:
				batch = append(batch, f)
			default:
				break more
			}
		}
		closing := f == nil
		if closing {
			batch = batch[:len(batch)-1]
		}
		if err := s.write(ctx, batch...); err != nil {
			return err
		}
		if closing {
			return s.conn.Close(wsconn.StatusNormalClosure, "drained")
		}
	}
}

// maxWriteBatch bounds the frames one socket write carries: a batch is
// encoded whole before it is written.
const maxWriteBatch = 64

// write encodes frames and writes them in one socket write, within
// WriteTimeout. A frame that cannot be encoded is logged and dropped.
func (s *session) write(ctx context.Context, frames ...nodeproto.Frame) error {
	msgs := make([][]byte, 0, len(frames))
	for _, f := range frames {
		b, err := nodeproto.Encode(f)
		if err != nil {
			s.a.cfg.Logger.Error("drop unencodable frame", "type", f.Type(), "err", err)
			continue
		}
		msgs = append(msgs, b)
	}
	if len(msgs) == 0 {
		return nil
	}
	if hoptrace.On {
		for _, f := range frames {
			if c, ok := f.(*nodeproto.Chunk); ok && c.Seq < 2 && engineclient.Classify(c.Delta).Tokens > 0 {
				hoptrace.Mark(c.RequestID, hoptrace.ChunkWritten)
			}
		}
	}
	wctx, cancel := context.WithTimeout(ctx, nodeproto.WriteTimeout)
	err := s.conn.WriteBatch(wctx, msgs)
	cancel()
	if err != nil {
		return fmt.Errorf("write %s: %w", frames[0].Type(), err)
	}
	return nil
}

// readLoop reads and dispatches server frames until the connection ends.
// Cancelling ctx closes the socket, which is how the loop is stopped.
func (s *session) readLoop(ctx context.Context) error {
	for {
		msg, err := s.conn.Read(ctx)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		f, err := nodeproto.Decode(msg)
		if errors.Is(err, nodeproto.ErrUnknownType) {
			continue
		}
		if err != nil {
			if code, ok := nodeproto.CloseCodeOf(err); ok {
				s.conn.Close(wsconn.StatusCode(code), "bad frame")
			}
			return fmt.Errorf("decode: %w", err)
		}
		s.handle(ctx, f)
	}
}
