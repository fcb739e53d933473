package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/strictjson"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

// errFirstTokenTimeout is the cause of a request whose engine sent nothing
// within the first-token timeout.
var errFirstTokenTimeout = errors.New("no first token within the timeout")

// errStreamIdle is the cause of a stream whose engine went silent after
// its first event for longer than the stream idle timeout.
var errStreamIdle = errors.New("the engine went silent mid-stream")

// chatCompletions serves POST /v1/chat/completions: authenticate, read and
// check the body, admit, dispatch (queueing when no engine is free), relay,
// then settle and give back the stream slot.
func (s *Server) chatCompletions(c *gin.Context) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.MaxRequestDuration)
	defer cancel()
	p, ok := s.principal(c)
	if !ok {
		return
	}
	req, raw, ok := readRequest(c)
	if !ok {
		return
	}
	if r := s.checkBody(c, p, req, raw); r != nil {
		s.write(c, r)
		return
	}
	a, r := s.admit(c, ctx, p, req)
	if r != nil {
		s.write(c, r)
		return
	}
	// However the handler ends — an answer, a refusal, a panic in the
	// relay — the row is settled from what the relay saw and the slot is
	// given back (afterRelay). Until the relay returns, the outcome is a
	// broken stream with the tokens counted so far.
	var (
		rel  relay
		out  Outcome
		view *clientView
		done bool
	)
	defer func() {
		if !done {
			out = rel.out
			out.State = Broken
			out = withProgress(out, view)
		}
		s.afterRelay(a, out)
	}()
	// The engine may never generate more than the ledger reserved for.
	if a.reserved.MaxOutputTokens > 0 {
		n := a.reserved.MaxOutputTokens
		req.MaxTokens, req.MaxCompletionTokens = &n, nil
	}

	dctx, dcancel := context.WithCancelCause(ctx)
	defer dcancel(nil)
	firstToken := time.AfterFunc(s.cfg.FirstTokenTimeout, func() { dcancel(errFirstTokenTimeout) })
	defer firstToken.Stop()
	stream, r := s.dispatch(dctx, a, req)
	if r != nil {
		if c.Request.Context().Err() == nil {
			s.write(c, r)
		}
		return
	}
	defer stream.Close()
	view = newClientView(stream, a.model, wantsContinuousUsage(req))
	stream = view
	// The prompt went to the engine. Read what the relay needs now and use
	// req no more, so the prompt is not kept alive for the stream's minutes.
	streamed, wantUsage := req.Stream, req.WantsUsage()
	s.cfg.Metrics.streamStarted(a.model)
	defer s.cfg.Metrics.streamEnded(a.model)
	// Once the first event came, silence longer than the idle timeout ends
	// the stream: it breaks, the client gets an error event, and the
	// ledger settles what was relayed.
	idle := time.AfterFunc(time.Hour, func() { dcancel(errStreamIdle) })
	idle.Stop()
	defer idle.Stop()
	rel = relay{c: c, stream: stream, held: holding{a.promptEstimate, a.reserved.MaxOutputTokens}, onFirst: func() {
		firstToken.Stop()
		s.cfg.Metrics.firstToken(a.model, time.Since(start))
	}, onEvent: func() { idle.Reset(s.cfg.StreamIdleTimeout) }}
	if streamed {
		out = rel.streamed(wantUsage)
	} else {
		out = rel.buffered()
	}
	if rel.completion > 0 && rel.held.exceeded(rel.prompt, rel.completion) {
		s.cfg.Metrics.overReservation(a.model)
		s.cfg.Logger.Warn("engine went past the reservation; the stream was cut", "request_id", a.requestID, "model", a.model,
			"max_output_tokens", a.reserved.MaxOutputTokens, "prompt_estimate", a.promptEstimate,
			"prompt_tokens", rel.prompt, "completion_tokens", rel.completion)
	}
	if errors.Is(context.Cause(dctx), errStreamIdle) {
		s.cfg.Logger.Warn("engine went silent mid-stream", "request_id", a.requestID, "model", a.model,
			"idle_timeout", s.cfg.StreamIdleTimeout.String())
	}
	out, done = withProgress(out, view), true
	s.cfg.Metrics.finished(a.model, out, time.Since(start))
	s.cfg.Logger.Info("chat completion", "request_id", a.requestID, "team", p.TeamName, "model", a.model,
		"stream", streamed, "prompt_tokens", out.PromptTokens, "completion_tokens", out.CompletionTokens,
		"outcome", out.State.String(), "ms", time.Since(start).Milliseconds())
}

// principal authenticates the request or answers 400/401/503. Two
// Authorization headers are refused: proxies and servers disagree on which
// one counts, and the platform reads exactly one.
func (s *Server) principal(c *gin.Context) (auth.Principal, bool) {
	if len(c.Request.Header.Values("Authorization")) > 1 {
		s.write(c, reject(http.StatusBadRequest, "bad_request", openai.TypeInvalidRequest, "duplicate_authorization", "",
			"send one Authorization header"))
		return auth.Principal{}, false
	}
	p, err := s.cfg.Auth.Authenticate(c.Request.Context(), c.GetHeader("Authorization"))
	if err != nil {
		s.write(c, authRejection(err))
		return auth.Principal{}, false
	}
	return p, true
}

// checkBody refuses internal URLs, unknown models and models the key may
// not use, before anything is counted against the key.
func (s *Server) checkBody(c *gin.Context, p auth.Principal, req *openai.ChatCompletionRequest, raw []byte) *rejection {
	if err := s.cfg.URLGuard.CheckJSON(c.Request.Context(), raw); err != nil {
		var be *urlguard.BlockedError
		param := ""
		if errors.As(err, &be) {
			param = be.Path
		}
		return reject(http.StatusBadRequest, "bad_request", openai.TypeInvalidRequest, "url_not_allowed", param,
			"the request references a URL that is not allowed: "+err.Error())
	}
	known, err := s.known(c.Request.Context(), req.Model)
	if err != nil {
		return unavailable("catalog")
	}
	if !known {
		return reject(http.StatusNotFound, "unknown_model", openai.TypeNotFound, "model_not_found", "model",
			"the model "+strconv.Quote(req.Model)+" does not exist")
	}
	if !p.AllowsModel(req.Model) {
		return reject(http.StatusForbidden, "forbidden", openai.TypePermission, "model_not_allowed", "model",
			"this key may not use the model "+strconv.Quote(req.Model))
	}
	return nil
}

func (s *Server) known(ctx context.Context, model string) (bool, error) {
	models, err := s.cfg.Catalog.Models(ctx)
	if err != nil {
		return false, err
	}
	for _, m := range models {
		if m.ID == model {
			return true, nil
		}
	}
	return false, nil
}

// dispatch starts the job, waiting in the model's shared queue while no
// engine has room, for at most the queue limit.
func (s *Server) dispatch(ctx context.Context, a *admission, req *openai.ChatCompletionRequest) (dispatch.Stream, *rejection) {
	job := &dispatch.Job{RequestID: a.requestID, Model: a.model, Request: req}
	var stream dispatch.Stream
	try := func(ctx context.Context) (bool, error) {
		st, err := s.cfg.Dispatcher.Dispatch(ctx, job)
		if errors.Is(err, dispatch.ErrNoCapacity) {
			return false, nil
		}
		stream = st
		return true, err
	}
	done, err := try(ctx)
	if err == nil && !done {
		queued := time.Now()
		err = s.cfg.Queue.Wait(ctx, a.model, a.requestID, s.cfg.QueueLimit, try)
		s.cfg.Metrics.queueWait(a.model, time.Since(queued))
	}
	if err != nil {
		return nil, dispatchRejection(ctx, err)
	}
	return stream, nil
}

func dispatchRejection(ctx context.Context, err error) *rejection {
	var engErr *dispatch.Error
	switch {
	case errors.As(err, &engErr):
		// An engine's or the platform's 503 says "busy, retry" (with its
		// Retry-After) and stays a 503; any other 5xx is the upstream's
		// failure, a 502.
		status := engErr.Status
		if status >= 500 && status != http.StatusServiceUnavailable {
			status = http.StatusBadGateway
		}
		return &rejection{status: status, reason: "engine_refused", body: engErr.Body, retryAfter: engErr.RetryAfter}
	case errors.Is(err, quota.ErrQueueTimeout), errors.Is(err, quota.ErrQueueFull):
		return reject(http.StatusServiceUnavailable, "queue_timeout", openai.TypeUnavailable, "no_capacity", "",
			"no engine had room for this model within the queue limit; retry later").after(retryNoCapacity)
	case errors.Is(err, dispatch.ErrUnknownModel), errors.Is(err, dispatch.ErrNoHealthyNode):
		return reject(http.StatusServiceUnavailable, "no_node", openai.TypeUnavailable, "no_healthy_node", "",
			"no healthy node serves this model right now; retry later").after(retryNoCapacity)
	case errors.Is(context.Cause(ctx), errFirstTokenTimeout):
		return reject(http.StatusGatewayTimeout, "first_token_timeout", openai.TypeServer, "first_token_timeout", "",
			"the engine did not answer in time")
	default:
		return reject(http.StatusBadGateway, "upstream", openai.TypeServer, "upstream_error", "",
			"the engine could not be reached").after(retryNoCapacity)
	}
}

// readRequest decodes and validates the body, answering 400/413 itself.
func readRequest(c *gin.Context) (*openai.ChatCompletionRequest, []byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(c, http.StatusRequestEntityTooLarge, openai.NewError(openai.TypeInvalidRequest, "request_too_large", "", "request body exceeds "+strconv.Itoa(MaxBodyBytes)+" bytes"))
			return nil, nil, false
		}
		writeError(c, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "invalid_body", "", "could not read the request body"))
		return nil, nil, false
	}
	req, e := decodeRequest(body)
	if e != nil {
		writeError(c, http.StatusBadRequest, e)
		return nil, nil, false
	}
	return req, body, true
}

// decodeRequest decodes and validates a chat request body; a refusal is
// the 400's body.
func decodeRequest(body []byte) (*openai.ChatCompletionRequest, *openai.ErrorBody) {
	// Keys are read exactly, as the engine reads them: a duplicate or a
	// variant spelling of a known key ("max_to\u212aens") would let
	// encoding/json and the engine disagree about what was asked.
	if err := strictjson.Check(body, requestType); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			code := "variant_key"
			if se.Duplicate {
				code = "duplicate_key"
			}
			return nil, openai.NewError(openai.TypeInvalidRequest, code, se.Path, se.Msg)
		}
		return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_json", "", "the request body is not valid JSON: "+err.Error())
	}
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_json", "", "the request body is not valid JSON: "+err.Error())
	}
	if name, n := extraBytes(&req); n > MaxExtraBytes {
		return nil, openai.NewError(openai.TypeInvalidRequest, "unknown_fields_too_large", name,
			fmt.Sprintf("fields the API does not define take %d bytes; at most %d are forwarded", n, MaxExtraBytes))
	}
	if err := req.Validate(); err != nil {
		var fe *openai.FieldError
		param := ""
		if errors.As(err, &fe) {
			param = fe.Param
		}
		return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_value", param, err.Error())
	}
	return &req, nil
}

// withProgress completes out with the engine's last running count, when a
// stream broke before its usage arrived: that count is exact where the
// relay's count of chunks is not.
func withProgress(out Outcome, view *clientView) Outcome {
	if view == nil || view.progress == nil || out.Usage {
		return out
	}
	p := view.progress
	out.Usage = true
	out.PromptTokens, out.CompletionTokens = p.PromptTokens, max(p.CompletionTokens, out.CompletionTokens)
	return out
}

// requestType is what a chat request body decodes into.
var requestType = reflect.TypeFor[openai.ChatCompletionRequest]()

// MaxExtraBytes bounds the fields of a request the API does not define
// (vLLM's own sampling options travel this way), summed over the request
// and its messages: enough for a guided-decoding schema, and far from the
// megabytes that would be held for a stream's whole life.
const MaxExtraBytes = 256 << 10

// extraBytes sums the raw size of the request's undefined fields and names
// the largest.
func extraBytes(req *openai.ChatCompletionRequest) (largest string, total int) {
	most := -1
	add := func(prefix string, extra map[string]json.RawMessage) {
		for k, v := range extra {
			total += len(k) + len(v)
			if len(v) > most {
				most, largest = len(v), prefix+k
			}
		}
	}
	add("", req.Extra)
	for i := range req.Messages {
		add(fmt.Sprintf("messages[%d].", i), req.Messages[i].Extra)
	}
	return largest, total
}
