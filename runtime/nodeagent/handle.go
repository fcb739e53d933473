package nodeagent

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// Causes of a request's cancellation, for its context.
var (
	errCancelled     = errors.New("cancelled by the server")
	errDrainDeadline = errors.New("drain deadline passed")
)

// handle acts on one server frame.
func (s *session) handle(ctx context.Context, f nodeproto.Frame) {
	switch f := f.(type) {
	case *nodeproto.Assign:
		s.assign(ctx, f)
	case *nodeproto.Window:
		s.mu.Lock()
		r := s.reqs[f.RequestID]
		s.mu.Unlock()
		if r != nil { // a grant may cross the request's end
			r.credit.grant(f.Chunks)
		}
	case *nodeproto.Ack:
		s.a.dones.ack(f.RequestIDs)
	case *nodeproto.Cancel:
		s.mu.Lock()
		r := s.reqs[f.RequestID]
		s.mu.Unlock()
		if r != nil {
			r.cancel(errCancelled)
		}
	case *nodeproto.Drain:
		s.drain(f.Deadline())
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
		s.send(ctx, &nodeproto.Error{Status: http.StatusNotImplemented, Message: "no model loader configured"})
	default:
		s.a.cfg.Logger.Warn("unexpected frame", "type", f.Type())
	}
}

// drain stops new work. With a deadline, requests still running when it
// passes are cancelled, and their done records say abort; of several
// drains the earliest deadline holds.
func (s *session) drain(deadline time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	if deadline > 0 {
		at := s.a.cfg.Clock.Now().Add(deadline)
		switch {
		case s.drainTimer == nil:
			s.drainTimer = s.a.cfg.Clock.AfterFunc(deadline, s.cancelAll)
			s.drainAt = at
		case at.Before(s.drainAt):
			s.drainTimer.Reset(deadline)
			s.drainAt = at
		}
	}
	s.checkDrained()
}

// selfDrain drains the connection for Agent.Drain and beats at once, so
// the server stops routing to the node now, not at the next heartbeat.
func (s *session) selfDrain() {
	s.drain(s.a.drainLeft())
	select {
	case s.beatNow <- struct{}{}:
	default:
	}
}

// cancelAll cancels every in-flight request at a drain's deadline.
func (s *session) cancelAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) > 0 {
		s.a.cfg.Logger.Warn("drain deadline passed; cancelling in-flight requests", "count", len(s.reqs))
	}
	for _, r := range s.reqs {
		r.cancel(errDrainDeadline)
	}
}

// checkDrained closes drained once draining with nothing in flight. The
// caller holds mu.
func (s *session) checkDrained() {
	if (s.draining || s.leaving) && len(s.reqs) == 0 {
		s.once.Do(func() { close(s.drained) })
	}
}
