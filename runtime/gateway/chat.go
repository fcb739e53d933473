package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"k8s.io/utils/clock"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/hoptrace"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

// errFirstTokenTimeout is the cause of a request whose engine sent nothing
// within the first-token timeout.
var errFirstTokenTimeout = errors.New("no first token within the timeout")

// errStreamIdle is the cause of a stream whose engine went silent after
// its first event for longer than the stream idle timeout.
var errStreamIdle = errors.New("the engine went silent mid-stream")

// chatCompletions serves POST /v1/chat/completions: authenticate, read and
// check the body, answer at once for a model at zero, admit, dispatch
// (queueing when no engine is free), relay, then settle and give back the
// stream slot. However the request ends — an answer, a refusal, the client
// gone, a timeout, a panic — the deferred close ends its admission once
// (admission.Close).
//
// It is two calls so that a stream waits in small frames: open runs the
// deep work (decoding, the quota script, the ledger) in a large frame that
// is gone by the time run waits for the engine's events. A goroutine's
// stack grows during that work, and the garbage collector halves it again
// only once what the goroutine uses while it waits is under a quarter of
// it; every open stream keeps its handler goroutine, so those frames are
// paid per stream (BenchmarkStreamMemory).
func (s *Server) chatCompletions(c *gin.Context) {
	x := &exchange{s: s, c: c, start: s.cfg.Clock.Now()}
	defer x.close()
	if x.open() {
		x.run()
	}
}

// exchange is one chat completion, from its admission to its settle. It
// lives on the heap: what it holds stays out of the frames the relay waits
// in.
type exchange struct {
	s     *Server
	c     *gin.Context
	start time.Time
	p     auth.Principal
	a     *admission // nil until the request is authenticated and checked
	// ctx is the request's, and ends with the client's; the timer ends it
	// early with the cause of the limit that passed (see expire). One
	// context and one timer serve the request from admission to settle:
	// each is paid by every open stream.
	ctx      context.Context
	cancel   context.CancelCauseFunc
	timer    clock.Timer
	deadline time.Time   // the end of MaxRequestDuration
	started  atomic.Bool // the engine's first event came
	// firstAt and endAt are when the engine's first event came and when
	// the relay returned (zero until then): the settle's timing.
	firstAt, endAt time.Time
	stream         dispatch.Stream
	view           *clientView
	rel            relay
	// out is the relay's outcome once it returned.
	out *Outcome
	// streamed and wantUsage are the request's: the prompt itself is not
	// kept for the stream's minutes.
	streamed, wantUsage bool
	// api is a Responses exchange's (POST /v1/responses): its body's
	// decoder and its answer's writer. Nil for a chat completion.
	api *responsesAPI
}

// open authenticates, admits, reads, checks, reserves and dispatches the
// request. It reports false when the request ends there, answered.
//
// The order is the cheapest refusal first. The key's limits (one Redis
// round trip) come before the body is read: a key over its stream slots or
// its requests per minute is refused without its body being read, however
// large, so a flood on one key costs the gateway almost nothing. The body
// is then read and decoded under the process's body budget (readRequest),
// whose weight is held until the reservation has answered: by then the
// request is bounded by its model's context, or refused.
func (x *exchange) open() bool {
	s, c := x.s, x.c
	x.deadline = x.start.Add(s.cfg.MaxRequestDuration)
	p, ok := s.principal(c)
	if !ok {
		return false
	}
	a := s.newAdmission(p, requestIDOf(c))
	x.p, x.a = p, a
	// Admission runs on the client's context: each of its steps has its
	// own timeout, and the contexts they derive for it would leave their
	// parent a map of children for the stream's life.
	if r := s.checkLimits(c, c.Request.Context(), p, a); r != nil {
		drainUnread(c)
		x.refuse(r)
		return false
	}
	var decode bodyDecoder
	if x.api != nil {
		decode = x.api.decode
	}
	req, raw, held, ok := s.readRequest(c, decode)
	if !ok {
		a.Close(Outcome{State: Refused})
		return false
	}
	defer held.release()
	if hoptrace.On {
		hoptrace.MarkAt(hoptrace.Key(raw), hoptrace.RelayIn, x.start)
	}
	if r := s.checkBody(c, p, req, raw); r != nil {
		x.refuse(r)
		return false
	}
	a.model = req.Model
	res := s.reservation(a, req)
	held0 := s.cfg.Clock.Now()
	if r := s.atZero(c, a, res, held); r != nil {
		x.refuse(r)
		return false
	}
	// A caller held for its model's wake has its whole duration from the
	// hold's end.
	x.deadline = x.deadline.Add(s.cfg.Clock.Since(held0))
	if r := s.admit(c.Request.Context(), a, res); r != nil {
		x.refuse(r)
		return false
	}
	held.release()
	if hoptrace.On {
		hoptrace.Alias(a.requestID, raw)
		hoptrace.Mark(a.requestID, hoptrace.Admitted)
	}
	// From the dispatch on, the first token has its own timeout, queueing
	// included.
	x.ctx, x.cancel = context.WithCancelCause(c.Request.Context())
	x.timer = s.cfg.Clock.AfterFunc(min(s.cfg.FirstTokenTimeout, x.deadline.Sub(s.cfg.Clock.Now())), x.expire)
	// The engine may never generate more than the ledger reserved for.
	if a.reserved.MaxOutputTokens > 0 {
		n := a.reserved.MaxOutputTokens
		req.MaxTokens, req.MaxCompletionTokens = &n, nil
	}
	stream, r := s.dispatch(x.ctx, a, req)
	if r != nil {
		if c.Request.Context().Err() == nil {
			s.recordRefusal(c.Request.Context(), a, r)
			s.write(c, r)
		}
		return false
	}
	// Nothing of the answer reaches the client before the reservation
	// holds: an early one (admit) has run while the engine prefilled, and
	// its refusal cancels the stream before the client's headers.
	if r := a.confirm(); r != nil {
		_ = stream.Close()
		a.Close(Outcome{State: Refused})
		if c.Request.Context().Err() == nil {
			s.recordRefusal(c.Request.Context(), a, r)
			s.write(c, r)
		}
		return false
	}
	x.stream = stream
	s.cfg.Metrics.streamStarted(a.model)
	x.view = newClientView(stream, a.model, wantsContinuousUsage(req))
	// The prompt went to the engine. Read what the relay needs now and use
	// req no more, so the prompt is not kept alive for the stream's minutes.
	x.streamed, x.wantUsage = req.Stream, req.WantsUsage()
	x.rel = relay{c: c, ctx: x.ctx, stream: x.view, view: x.view, held: a.holding(), continuous: x.view.continuous,
		onFirst: x.onFirst, onEvent: x.onEvent, onEnd: x.release}
	if hoptrace.On {
		x.rel.trace.Set(a.requestID)
	}
	return true
}

// refuse ends the admission, giving back what it took before the answer
// (the key's next request finds its slot free), then answers r.
func (x *exchange) refuse(r *rejection) {
	x.a.Close(Outcome{State: Refused})
	x.s.recordRefusal(x.c.Request.Context(), x.a, r)
	x.s.write(x.c, r)
}

// arm sets the timer to d from now, or to the request's deadline when
// that comes first.
func (x *exchange) arm(d time.Duration) { x.timer.Reset(min(d, x.deadline.Sub(x.s.cfg.Clock.Now()))) }

// expire ends the request when its timer fires, with the cause of the
// limit that passed: the request's whole duration, the wait for the first
// token, or — once the first event came — silence longer than the idle
// timeout, after which the stream breaks, the client gets an error event
// and the ledger settles what was relayed.
func (x *exchange) expire() {
	switch {
	case !x.s.cfg.Clock.Now().Before(x.deadline):
		x.cancel(context.DeadlineExceeded)
	case x.started.Load():
		x.cancel(errStreamIdle)
	default:
		x.cancel(errFirstTokenTimeout)
	}
}

func (x *exchange) onFirst() {
	x.started.Store(true)
	x.firstAt = x.s.cfg.Clock.Now()
	x.s.cfg.Metrics.firstToken(x.a.model, x.firstAt.Sub(x.start))
}

// onEvent runs after every event, the first included.
func (x *exchange) onEvent() { x.arm(x.s.cfg.StreamIdleTimeout) }

// release runs before a streamed answer's end ([DONE]) is written: the
// engine's place is freed, then the key's limits ended (admission.release:
// the stream slot given back, the day's tokens counted, the queue's head
// woken). A client that sends its next request as soon as it read [DONE]
// finds the slot free; and the answer's end then goes out with the
// response's own end, with nothing left to wait for, so a client that
// stops reading at [DONE] still leaves its connection whole for the next
// request.
func (x *exchange) release(out Outcome) {
	_ = x.stream.Close()
	x.a.release(withProgress(out, x.view))
}

// run relays the engine's stream to the client; close settles.
func (x *exchange) run() {
	if x.api != nil {
		x.api.name(x.a.requestID, x.a.model, x.start)
	}
	switch {
	case x.api != nil && x.streamed:
		x.out = x.end(x.rel.responsesStreamed(x.api))
	case x.api != nil:
		x.out = x.end(x.rel.responsesBuffered(x.api))
	case x.streamed:
		x.out = x.end(x.rel.streamed(x.wantUsage))
	default:
		x.out = x.end(x.rel.buffered())
	}
}

// end reports and logs a relay that returned.
func (x *exchange) end(out Outcome) *Outcome {
	s, a := x.s, x.a
	if x.rel.completion > 0 && x.rel.held.exceeded(x.rel.prompt, x.rel.completion) {
		s.cfg.Metrics.overReservation(a.model)
		s.cfg.Logger.Warn("engine went past the reservation; the stream was cut", "request_id", a.requestID, "model", a.model,
			"max_output_tokens", a.reserved.MaxOutputTokens, "prompt_estimate", a.promptEstimate,
			"prompt_tokens", x.rel.prompt, "completion_tokens", x.rel.completion)
	}
	if x.view.dupKey {
		s.cfg.Logger.Warn("engine sent an event with a duplicate key; the stream was ended", "request_id", a.requestID, "model", a.model)
	}
	if errors.Is(context.Cause(x.ctx), errStreamIdle) {
		s.cfg.Logger.Warn("engine went silent mid-stream", "request_id", a.requestID, "model", a.model,
			"idle_timeout", s.cfg.StreamIdleTimeout.String())
	}
	out = withProgress(out, x.view)
	x.endAt = s.cfg.Clock.Now()
	s.cfg.Metrics.finished(a.model, out, x.endAt.Sub(x.start))
	endpoint := "chat completion"
	if x.api != nil {
		endpoint = "response"
	}
	s.cfg.Logger.Info(endpoint, "request_id", a.requestID, "team", x.p.TeamName, "model", a.model,
		"stream", x.streamed, "prompt_tokens", out.PromptTokens, "completion_tokens", out.CompletionTokens,
		"outcome", out.State.String(), "ms", x.endAt.Sub(x.start).Milliseconds())
	return &out
}

// close ends the exchange, however it ended: the timer, the stream (so the
// engine's place is free before the queue is woken), the request's
// contexts, then the admission (admission.Close) with the outcome.
func (x *exchange) close() {
	if x.timer != nil {
		x.timer.Stop()
	}
	if x.stream != nil {
		x.s.cfg.Metrics.streamEnded(x.a.model)
		_ = x.stream.Close()
	}
	if x.cancel != nil {
		x.cancel(nil)
	}
	if x.a != nil {
		x.a.timing = x.timing()
		x.a.Close(x.outcome())
	}
}

// timing is how the answer came, for the settle; nil when no event of the
// engine came (nothing to time).
func (x *exchange) timing() *ledger.Timing {
	if x.firstAt.IsZero() {
		return nil
	}
	end := x.endAt
	if end.IsZero() {
		end = x.s.cfg.Clock.Now() // the relay did not return (a panic)
	}
	return &ledger.Timing{FirstToken: x.firstAt.Sub(x.start), Generation: end.Sub(x.firstAt), QueueWait: x.a.queueWait}
}

// outcome is how the request ended: the relay's outcome once it returned;
// a broken stream with what it counted when the relay did not return (a
// panic); Refused when no answer began.
func (x *exchange) outcome() Outcome {
	switch {
	case x.out != nil:
		return *x.out
	case x.stream != nil:
		o := x.rel.out
		o.State = Broken
		return withProgress(o, x.view)
	default:
		return Outcome{State: Refused}
	}
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
	job, err := dispatch.NewJob(a.requestID, req, a.promptEstimate)
	if err != nil {
		s.cfg.Logger.Error("engine request not encoded", "request_id", a.requestID, "err", err)
		return nil, reject(http.StatusInternalServerError, "internal", openai.TypeServer, "internal_error", "",
			"the platform could not encode this request for the engine")
	}
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
		queued := s.cfg.Clock.Now()
		err = s.cfg.Queue.Wait(ctx, a.model, a.requestID, s.cfg.QueueLimit, try)
		a.queueWait = s.cfg.Clock.Since(queued)
		s.cfg.Metrics.queueWait(a.model, a.queueWait)
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
	case errors.Is(err, quota.ErrQueueTimeout):
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

// withProgress completes out with the engine's last running count, when a
// stream broke before its usage arrived: the engine's count, judged like
// its usage by the relayed text (ledger.BoundUsage), is exact where the
// platform's stand-in count is not.
func withProgress(out Outcome, view *clientView) Outcome {
	if view == nil || view.progress == nil || out.Usage {
		return out
	}
	p := view.progress
	out.Usage = true
	out.PromptTokens, out.CompletionTokens = p.PromptTokens, p.CompletionTokens
	return out
}
