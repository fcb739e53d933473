package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/hoptrace"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
)

// assign starts a request, or refuses it with a request error.
func (s *session) assign(ctx context.Context, a *nodeproto.Assign) {
	if hoptrace.On {
		hoptrace.Alias(a.RequestID, a.Body)
		hoptrace.Mark(a.RequestID, hoptrace.AssignRead)
	}
	refuse := func(status int, msg string) {
		s.send(ctx, &nodeproto.Error{RequestID: a.RequestID, Status: status, Message: msg})
	}
	if !s.a.cfg.serves(a.Model) {
		refuse(http.StatusNotFound, "model not served by this node")
		return
	}
	s.mu.Lock()
	switch {
	case s.draining || s.leaving:
		s.mu.Unlock()
		refuse(http.StatusServiceUnavailable, "node is draining")
		return
	case s.reqs[a.RequestID] != nil:
		s.mu.Unlock()
		refuse(http.StatusConflict, "request already running")
		return
	}
	rctx, cancel := context.WithCancelCause(ctx)
	r := &inflight{cancel: cancel, credit: newCredit(s.w.Window)}
	s.reqs[a.RequestID] = r
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer s.finish(a.RequestID, r)
		s.run(ctx, rctx, r, a)
	}()
}

// finish forgets a request and completes a drain it was the last of.
func (s *session) finish(id string, r *inflight) {
	r.cancel(errSessionOver)
	s.mu.Lock()
	delete(s.reqs, id)
	s.checkDrained()
	s.mu.Unlock()
}

// run streams one request from the engine and ends it with done or
// error. sctx is the connection's context, for sending; rctx is the
// request's, which a cancel, a drain's deadline or the link's end cancels:
// the engine stream is then closed and the done says abort.
func (s *session) run(sctx, rctx context.Context, r *inflight, a *nodeproto.Assign) {
	id := a.RequestID
	body, err := streamingBody(a.Body)
	if err != nil {
		s.send(sctx, &nodeproto.Error{RequestID: id, Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	// The agent reads what its done record needs (Classify); the platform
	// reads each event itself, once, at the orchestrator.
	st, err := engineclient.OpenEngineStreamReading(rctx, s.a.cfg.HTTPClient, s.a.cfg.EngineURL, id, body, engineclient.Classify)
	if err != nil {
		if rctx.Err() != nil {
			s.complete(sctx, &nodeproto.Done{RequestID: id, FinishReason: openai.FinishAbort})
			return
		}
		var de *dispatch.Error
		if !errors.As(err, &de) || de.Status >= http.StatusInternalServerError {
			s.engineFailed() // unreachable or failing: tell the server now
		}
		s.send(sctx, refusal(id, err))
		return
	}
	done := s.relay(sctx, rctx, r, id, st)
	st.Close() // aborts the engine's request if it still runs
	if done != nil {
		s.complete(sctx, done)
	}
}

// relay sends the engine's events as chunk frames within the request's
// credit and returns the request's done record, or nil after sending an
// error frame for a stream that broke before its first chunk.
func (s *session) relay(sctx, rctx context.Context, r *inflight, id string, st dispatch.Stream) *nodeproto.Done {
	var t tally
	for {
		ev, err := st.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return t.done(id, t.finish)
		case err != nil && rctx.Err() != nil:
			return t.done(id, openai.FinishAbort)
		case err != nil && t.seq == 0:
			s.send(sctx, &nodeproto.Error{RequestID: id, Status: http.StatusBadGateway, Message: "engine stream broke"})
			return nil
		case err != nil:
			// Chunks went out: the done carries their counts, and its
			// empty finish reason tells the server the stream broke.
			return t.done(id, "")
		}
		t.add(ev)
		// Data is valid only until the next Recv; the writer encodes later.
		c := &nodeproto.Chunk{RequestID: id, Seq: t.seq, Delta: validDelta(ev.Data)}
		ok, stalled := r.credit.take(rctx, s.a.cfg.Clock, s.a.cfg.creditStall)
		if stalled {
			s.a.cfg.Logger.Warn("no chunk credit granted for the request: giving it up",
				"request_id", id, "waited", s.a.cfg.creditStall.String())
		}
		if !ok || !s.send(sctx, c) {
			return t.done(id, openai.FinishAbort)
		}
		t.seq++
	}
}

// tally counts a request's stream as it is relayed.
type tally struct {
	seq, completion int64
	usage           *openai.Usage
	progress        *openai.Usage // the engine's last running count
	finish          string
}

// add counts one engine event.
func (t *tally) add(ev dispatch.Event) {
	t.completion += ev.Tokens
	if ev.Usage != nil {
		t.usage = ev.Usage
	}
	if ev.Progress != nil {
		t.progress = ev.Progress
	}
	if r := finishReason(ev.Data); r != "" {
		t.finish = r
	}
}

// done returns the request's done record: the engine's usage counts when
// its usage chunk came, else its last running count (exact up to the
// chunk it came with), else the output chunks read.
func (t *tally) done(id, finish string) *nodeproto.Done {
	d := &nodeproto.Done{RequestID: id, CompletionTokens: t.completion, FinishReason: finish}
	switch {
	case t.usage != nil:
		d.PromptTokens, d.CompletionTokens = t.usage.PromptTokens, t.usage.CompletionTokens
	case t.progress != nil:
		d.PromptTokens, d.CompletionTokens = t.progress.PromptTokens, max(t.progress.CompletionTokens, t.completion)
	}
	return d
}

// complete keeps a request's done record until acknowledged, appends it
// to the completion log, then sends it. When this connection is over, the
// newest live connection takes it; either way the record waits in the
// store for the next replay until an ack names it.
func (s *session) complete(sctx context.Context, d *nodeproto.Done) {
	if old := s.a.dones.add(d); old != nil {
		_, dropped := s.a.dones.counts()
		s.a.cfg.Logger.Warn("dropped an unacknowledged done record at the cap",
			"request_id", old.RequestID, "dropped_total", dropped)
	}
	if err := s.a.clog.write(d); err != nil {
		s.a.cfg.Logger.Error("write completion log", "request_id", d.RequestID, "err", err)
	}
	if s.send(sctx, d) {
		return
	}
	if live := s.a.live.Load(); live != nil && live != s {
		live.offer(d)
	}
}

// refusal turns an engine's refusal into a request error frame.
func refusal(id string, err error) *nodeproto.Error {
	var de *dispatch.Error
	if !errors.As(err, &de) {
		return &nodeproto.Error{RequestID: id, Status: http.StatusServiceUnavailable, Message: "engine unreachable"}
	}
	e := &nodeproto.Error{RequestID: id, Status: de.Status, Message: de.Error(), RetryAfter: int(de.RetryAfter.Seconds())}
	if de.Body != nil {
		if b, err := json.Marshal(de.Body); err == nil {
			e.Body = b
		}
	}
	if e.Status < 400 || e.Status > 599 {
		e.Status = http.StatusBadGateway
	}
	return e
}

// streamingBody returns the engine body with stream and include_usage on.
// A body that has them already is passed byte for byte.
func streamingBody(body json.RawMessage) ([]byte, error) {
	if engineclient.StreamsWithUsage(body) {
		return body, nil // the gateway's form, read without a decode
	}
	var probe struct {
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, fmt.Errorf("decode assign body: %w", err)
	}
	if probe.Stream && probe.StreamOptions != nil && probe.StreamOptions.IncludeUsage {
		return body, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("decode assign body: %w", err)
	}
	if m == nil { // null decodes without an error and leaves no map
		return nil, errors.New("decode assign body: not a JSON object")
	}
	opts := map[string]json.RawMessage{}
	if raw, ok := m["stream_options"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &opts); err != nil {
			return nil, fmt.Errorf("decode stream_options: %w", err)
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	m["stream"] = json.RawMessage("true")
	var err error
	if m["stream_options"], err = json.Marshal(opts); err != nil {
		return nil, fmt.Errorf("encode stream_options: %w", err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode assign body: %w", err)
	}
	return b, nil
}

// finishReason returns the finish reason a chunk carries, reading only
// chunks that may name one: in place (engineclient.FinishReason), or decoded
// when the in-place read is unsure.
func finishReason(data []byte) string {
	if !mayNameFinishReason(data) {
		return ""
	}
	if r, ok := engineclient.FinishReason(data); ok {
		return r
	}
	var c openai.ChatCompletionChunk
	if json.Unmarshal(data, &c) != nil {
		return ""
	}
	for _, ch := range c.Choices {
		if ch.FinishReason != nil {
			return *ch.FinishReason
		}
	}
	return ""
}

// mayNameFinishReason reports whether data has a "finish_reason" key with
// a string value, however spaced: vLLM sends "finish_reason":null on every
// chunk but the last, and only that one is worth reading. A key spelled
// with escapes or in another case is not looked for: no engine writes one.
func mayNameFinishReason(data []byte) bool {
	const key = `"finish_reason"`
	for rest := data; ; {
		i := bytes.Index(rest, []byte(key))
		if i < 0 {
			return false
		}
		rest = bytes.TrimLeft(rest[i+len(key):], jsonSpace)
		if len(rest) > 0 && rest[0] == ':' {
			if v := bytes.TrimLeft(rest[1:], jsonSpace); len(v) > 0 && v[0] == '"' {
				return true
			}
		}
	}
}

// jsonSpace is JSON's whitespace.
const jsonSpace = " \t\n\r"

// validDelta returns a copy of an engine event that is valid UTF-8: the
// node socket carries it in a text frame, which RFC 6455 requires to be
// UTF-8 (a strict proxy closes the link otherwise). An engine's invalid
// bytes become U+FFFD, as a browser would show them. The engine stream
// already sends them so (engineclient.AppendValidUTF8); the copy keeps the
// rule whatever stream an event came from.
func validDelta(data []byte) []byte {
	return engineclient.AppendValidUTF8(make([]byte, 0, len(data)), data)
}
