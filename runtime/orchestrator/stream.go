package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
)

// errLost means a request's node, its socket or its owning replica went
// away: before the first event the request is retried on another node.
var errLost = errors.New("node lost")

// errGone marks a loss after which nothing runs on the node to cancel: the
// owner reported it, or the socket (or its replica) died, and the agent
// cancels its engine requests when its socket goes. A loss the requester
// only suspects (a record expired, a bad reply, its own shutdown) lacks it,
// and Close then sends a cancel.
var errGone = errors.New("nothing runs on the node")

// errCredit means a node sent a request more chunks than it was granted.
var errCredit = errors.New("chunk credit exceeded")

// sink receives the frames of one request from the socket that runs it:
// the consumer's stream on this replica, or a relay to the replica that
// asked. push never blocks; it reports false when the request's buffer is
// full, which only a node ignoring its credit can cause.
type sink interface {
	push(f nodeproto.Frame) bool
	// fail ends the request without its done: the node or the link is gone.
	fail(err error)
}

// link sends a request's control frames back towards its node: over the
// socket, or on the node's channel to the replica that owns the socket.
type link interface {
	grant(requestID string, chunks int)
	abort(requestID, reason string)
}

// reqStream is one request as its consumer sees it: a dispatch.Stream fed
// by a sink. Its buffer holds the window plus the done or error frame, so
// push never blocks the socket's read loop.
type reqStream struct {
	id     string
	nodeID string
	epoch  int64
	owner  string // the replica holding the node's socket, for forwarded requests
	// attempt is the forwarded try's nonce: replies of another are not
	// this stream's.
	attempt uint64
	link    link
	window  int

	ch       chan nodeproto.Frame // buffered: window + 2, see push
	failOnce sync.Once
	failed   chan struct{} // closed by fail
	failErr  error         // set before failed closes
	// ctxDone and ctxErr are the request context's: once it ends,
	// buffered frames are dropped, since nobody will read them.
	ctxDone <-chan struct{}
	ctxErr  func() error

	// The consumer's side; only Recv and Close touch it.
	pending  nodeproto.Frame // the next frame, taken by first or Wait
	waitErr  error           // the next error, taken by Wait
	nextSeq  int64
	unacked  int   // chunks read since the last grant
	finished bool  // Recv has returned the end
	endErr   error // what Recv returns once finished
	settled  bool  // the node ended the request (done or error) or is gone: nothing to cancel
	sawErr   bool  // an error event was returned: the stream ends as the engine ended it

	closeOnce sync.Once
	onClose   func() // forgets the request; runs once

	// tokened is set by the read loop once it pushed a chunk with output
	// (firstOutput).
	tokened atomic.Bool
}

// watch ends the stream when ctx ends, as the Dispatcher contract asks:
// Recv returns at once, and Close cancels on the node.
func (s *reqStream) watch(ctx context.Context) {
	s.ctxDone = ctx.Done()
	s.ctxErr = func() error { return fmt.Errorf("request ended: %w", context.Cause(ctx)) }
}

var (
	_ dispatch.Stream  = (*reqStream)(nil)
	_ dispatch.Waiter  = (*reqStream)(nil)
	_ dispatch.Readier = (*reqStream)(nil)
)

func newReqStream(id, nodeID string, epoch int64, window int, l link, onClose func()) *reqStream {
	return &reqStream{
		id: id, nodeID: nodeID, epoch: epoch, link: l, window: window,
		ch: make(chan nodeproto.Frame, window+2), failed: make(chan struct{}), onClose: onClose,
	}
}

// push implements sink.
func (s *reqStream) push(f nodeproto.Frame) bool {
	select {
	case s.ch <- f:
		return true
	default:
		return false
	}
}

// firstOutputScan bounds the chunks of a request the read loop looks into
// for its first output: engines send the role chunk, then the first token.
const firstOutputScan = 4

// readChunk is a chunk the read loop already parsed (early): its consumer
// takes the event as read, so each event is parsed once.
type readChunk struct {
	*nodeproto.Chunk
	ev dispatch.Event
}

// early parses a chunk on the read loop while the request's first output
// may still be ahead (the first firstOutputScan chunks, until one had
// output); ok is false for the chunks it leaves to the consumer.
func (s *reqStream) early(c *nodeproto.Chunk) (ev dispatch.Event, ok bool) {
	if c.Seq >= firstOutputScan || s.tokened.Load() {
		return dispatch.Event{}, false
	}
	return engineclient.ParseEvent(c.Delta), true
}

// firstOutput reports, for an early chunk's event, whether it is the
// first of the request to carry output (a token, a tool call's or an
// error): the one its client waits for, measured as time to first token.
func (s *reqStream) firstOutput(ev *dispatch.Event) bool {
	if ev.Tokens == 0 && ev.Err == nil {
		return false
	}
	return !s.tokened.Swap(true)
}

// fail implements sink.
func (s *reqStream) fail(err error) {
	s.failOnce.Do(func() {
		s.failErr = err
		close(s.failed)
	})
}

// next waits for the request's next frame. Frames already buffered come
// before a failure, so chunks that arrived are relayed before the error.
func (s *reqStream) next(ctx context.Context) (nodeproto.Frame, error) {
	select {
	case <-s.ctxDone: // nil until watch: never ready
		return nil, s.ctxErr()
	default:
	}
	if f := s.pending; f != nil {
		s.pending = nil
		return f, nil
	}
	if err := s.waitErr; err != nil {
		s.waitErr = nil
		return nil, err
	}
	select {
	case f := <-s.ch:
		return f, nil
	default:
	}
	select {
	case f := <-s.ch:
		return f, nil
	case <-s.failed:
		select {
		case f := <-s.ch:
			return f, nil
		default:
			return nil, s.failErr
		}
	case <-s.ctxDone:
		return nil, s.ctxErr()
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// first waits for the request's first frame and keeps it for Recv. It
// returns nil when the request started streaming (or ended at once with
// done), or the refusal: errLost, or a *dispatch.Error from the node.
func (s *reqStream) first(ctx context.Context) error {
	f, err := s.next(ctx)
	if err != nil {
		s.settled = errors.Is(err, errGone)
		return err
	}
	if e, ok := f.(*nodeproto.Error); ok {
		s.settled = true
		return nodeRefusal(e)
	}
	s.pending = f
	return nil
}

// Wait implements dispatch.Waiter: it takes the next frame (or the
// error) ahead, for Recv.
func (s *reqStream) Wait() {
	if s.finished || s.pending != nil || s.waitErr != nil {
		return
	}
	s.pending, s.waitErr = s.next(context.Background())
}

// Ready implements dispatch.Readier. Once Dispatch returned it is true
// until the first event is taken: Dispatch waits for it.
func (s *reqStream) Ready() bool {
	if s.finished || s.pending != nil || s.waitErr != nil || len(s.ch) > 0 {
		return true
	}
	select {
	case <-s.failed:
		return true
	default:
		return false
	}
}

// Recv implements dispatch.Stream.
func (s *reqStream) Recv() (dispatch.Event, error) {
	if s.finished {
		return dispatch.Event{}, s.endErr
	}
	f, err := s.next(context.Background())
	return s.take(f, err)
}

// take turns the next frame into Recv's answer. It is apart from Recv so
// that the frame a stream waits in stays small (see the gateway's
// chatCompletions).
func (s *reqStream) take(f nodeproto.Frame, err error) (dispatch.Event, error) {
	if err != nil {
		s.settled = errors.Is(err, errGone)
		return s.end(fmt.Errorf("%w: %w", dispatch.ErrStreamBroken, err))
	}
	switch f := f.(type) {
	case *readChunk:
		return s.chunk(f.Chunk, &f.ev)
	case *nodeproto.Chunk:
		return s.chunk(f, nil)
	case *nodeproto.Done:
		s.settled = true
		if f.FinishReason == "" && !s.sawErr {
			// The agent's engine stream broke: the done only carries counts.
			return s.end(fmt.Errorf("%w: the engine stream broke", dispatch.ErrStreamBroken))
		}
		// Complete, or the engine's error event then its end, as vLLM
		// ends a failed stream.
		return s.end(io.EOF)
	case *nodeproto.Error:
		// The node's error mid-stream becomes the error event vLLM would
		// have sent, and the stream ends after it.
		s.finished, s.settled, s.endErr = true, true, io.EOF
		return dispatch.Event{Data: errorEvent(f), Err: errorOf(f)}, nil
	}
	return s.end(fmt.Errorf("%w: unexpected %s frame", dispatch.ErrStreamBroken, f.Type()))
}

// chunk is Recv's answer for the next chunk: its event, parsed here unless
// the read loop did (ev).
func (s *reqStream) chunk(c *nodeproto.Chunk, ev *dispatch.Event) (dispatch.Event, error) {
	if c.Seq != s.nextSeq {
		return s.end(fmt.Errorf("%w: chunk %d after %d", dispatch.ErrStreamBroken, c.Seq, s.nextSeq-1))
	}
	s.nextSeq++
	if s.unacked++; s.unacked >= max(1, s.window/2) {
		s.link.grant(s.id, s.unacked)
		s.unacked = 0
	}
	if ev == nil {
		parsed := engineclient.ParseEvent(c.Delta)
		ev = &parsed
	}
	s.sawErr = s.sawErr || ev.Err != nil
	return *ev, nil
}

// end finishes the stream with err, which Recv returns from now on.
func (s *reqStream) end(err error) (dispatch.Event, error) {
	s.finished, s.endErr = true, err
	return dispatch.Event{}, err
}

// Close implements dispatch.Stream: a request still running on its node
// (it has sent neither done nor error, and the node is not lost) is
// cancelled there.
func (s *reqStream) Close() error {
	s.closeOnce.Do(func() {
		if !s.settled {
			s.link.abort(s.id, "client_gone")
		}
		s.onClose()
	})
	return nil
}

// nodeRefusal turns a node's request error before the first event into the
// dispatcher's error: 503 (draining, engine unreachable) and 404 (model
// not served, a stale snapshot) mean another node may take it.
func nodeRefusal(e *nodeproto.Error) error {
	if e.Status == http.StatusServiceUnavailable || e.Status == http.StatusNotFound {
		return fmt.Errorf("%w: node answered %d: %s", errLost, e.Status, e.Message)
	}
	de := &dispatch.Error{Status: e.Status, Body: &openai.ErrorBody{Error: *errorOf(e)}}
	if e.RetryAfter > 0 {
		de.RetryAfter = time.Duration(e.RetryAfter) * time.Second
	}
	return de
}

// errorOf returns the OpenAI error a node's error frame carries.
func errorOf(e *nodeproto.Error) *openai.Error {
	var body openai.ErrorBody
	if len(e.Body) > 0 && json.Unmarshal(e.Body, &body) == nil && body.Error.Message != "" {
		return &body.Error
	}
	return &openai.NewEngineError(e.Status, "", e.Message).Error
}

// errorEvent is the SSE payload of a mid-stream error.
func errorEvent(e *nodeproto.Error) []byte {
	b, err := json.Marshal(openai.ErrorBody{Error: *errorOf(e)})
	if err != nil {
		return []byte(`{"error":{"message":"node error","type":"server_error"}}`)
	}
	return b
}
