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
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
)

// assign starts a request, or refuses it with a request error.
func (s *session) assign(ctx context.Context, a *nodeproto.Assign) {
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
	rctx, cancel := context.WithCancel(ctx)
	s.reqs[a.RequestID] = cancel
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer s.finish(a.RequestID, cancel)
		s.run(ctx, rctx, a)
	}()
}

// finish forgets a request and completes a drain it was the last of.
func (s *session) finish(id string, cancel context.CancelFunc) {
	cancel()
	s.mu.Lock()
	delete(s.reqs, id)
	s.checkDrained()
	s.mu.Unlock()
}

// run streams one request from the engine. sctx is the connection's
// context, for sending; rctx is the request's, cancelled by cancel.
func (s *session) run(sctx, rctx context.Context, a *nodeproto.Assign) {
	id := a.RequestID
	body, err := streamingBody(a.Body)
	if err != nil {
		s.send(sctx, &nodeproto.Error{RequestID: id, Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	st, err := dispatch.OpenEngineStream(rctx, s.a.cfg.HTTPClient, s.a.cfg.EngineURL, id, body)
	if err != nil {
		if rctx.Err() != nil {
			s.send(sctx, &nodeproto.Done{RequestID: id, FinishReason: openai.FinishAbort})
			return
		}
		s.send(sctx, refusal(id, err))
		return
	}
	defer st.Close()
	var (
		seq, completion int64
		usage           *openai.Usage
		finish          string
	)
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if rctx.Err() != nil {
				s.send(sctx, &nodeproto.Done{RequestID: id, CompletionTokens: completion, FinishReason: openai.FinishAbort})
				return
			}
			s.send(sctx, &nodeproto.Error{RequestID: id, Status: http.StatusBadGateway, Message: "engine stream broke"})
			return
		}
		completion += ev.Tokens
		if ev.Usage != nil {
			usage = ev.Usage
		}
		if r := finishReason(ev.Data); r != "" {
			finish = r
		}
		// Data is valid only until the next Recv; the writer encodes later.
		if !s.send(sctx, &nodeproto.Chunk{RequestID: id, Seq: seq, Delta: bytes.Clone(ev.Data)}) {
			return
		}
		seq++
	}
	done := &nodeproto.Done{RequestID: id, CompletionTokens: completion, FinishReason: finish}
	if usage != nil {
		done.PromptTokens, done.CompletionTokens = usage.PromptTokens, usage.CompletionTokens
	}
	s.send(sctx, done)
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

// finishReason returns the finish reason a chunk carries, decoding only
// chunks that name one.
func finishReason(data []byte) string {
	if !bytes.Contains(data, []byte(`"finish_reason":"`)) {
		return ""
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
