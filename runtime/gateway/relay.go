package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/hoptrace"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/openai"
)

// State is how a relayed request ended.
type State int

// The ways a request ends. The ledger settles Completed with the engine's
// usage, ClientGone and Broken with the tokens counted so far, and cancels
// a Refused request's row, if it has one.
const (
	Completed  State = iota // the engine finished
	ClientGone              // the client disconnected mid-stream
	Broken                  // the engine or the link to it failed, or timed out
	Refused                 // it ended before its answer began (a refusal, the client gone while it waited): nothing was produced
)

func (s State) String() string {
	return [...]string{"completed", "client_gone", "broken", "refused"}[s]
}

// Outcome is what the ledger needs to settle a relayed request.
type Outcome struct {
	State State
	// Usage is set when the engine's usage event arrived: then the token
	// counts are the engine's own. Otherwise CompletionTokens is the
	// platform's own count of what was relayed (Relayed.Tokens) and
	// PromptTokens is zero (unknown).
	Usage            bool
	PromptTokens     int64
	CompletionTokens int64
	// Relayed is the platform's own count of the output the relay took
	// from the engine for the client (dispatch.Event.Text), whatever the
	// engine's usage says: a settle bills the engine's count only within
	// its tolerance (ledger.BoundUsage).
	Relayed ledger.Relayed
}

// relay copies one engine stream to one client.
type relay struct {
	c *gin.Context
	// ctx is the request's; its cause names a limit that ended it.
	ctx    context.Context
	stream dispatch.Stream
	// view shows the client its answer (clientView.shown); nil shows the
	// engine's events as they came.
	view    *clientView
	onFirst func()
	// onEvent runs after every event, the first included.
	onEvent func()
	// onEnd runs, with the outcome, before the end of a streamed answer
	// ([DONE]) is written; not when the client is gone.
	onEnd func(Outcome)
	// held is what the ledger reserved for; the zero value holds nothing
	// back.
	held holding
	sse  *openai.SSEWriter // the streamed answer's, once begun
	// unflushed: what was written waits for the next event's write,
	// which is already there (flush).
	unflushed bool
	started   bool
	out       Outcome
	// trace is the request's id until its first token is flushed, in a
	// build that traces hops; empty otherwise.
	trace hoptrace.Tag
	// prompt and completion are the highest counts seen: the engine's
	// running usage, or the fewest tokens the text relayed holds.
	prompt, completion int64
	// continuous: the client asked for the running usage on every chunk,
	// which it is shown bounded (shownUsage).
	continuous bool
}

// holding is what a request's reservation covers — the prompt estimate
// and the output cap, in tokens — and what the request tells of the
// engine's counts: the words of its prompt's text, the size of its stop
// sequences (ledger.Bounds).
type holding struct {
	promptEstimate, maxOutput int64
	promptFloor, stopBytes    int64
}

// bounds is the holding as the ledger's bound reads it.
func (h holding) bounds() ledger.Bounds {
	return ledger.Bounds{PromptEstimate: h.promptEstimate, MaxOutput: h.maxOutput, PromptFloor: h.promptFloor, StopBytes: h.stopBytes}
}

// tolerance is the holding's bounds without the reservation's: what the
// text relayed and the request make plausible of an engine's counts.
func (h holding) tolerance() ledger.Bounds {
	b := h.bounds()
	b.MaxOutput = 0
	return b
}

// errOverReservation ends a stream whose engine went past what the ledger
// reserved: more output than the cap it was sent, or a prompt so much
// larger than the estimate that prompt and output together pass the
// tokens reserved.
var errOverReservation = errors.New("the engine's answer passed the request's reservation")

// exceeded reports whether counts seen mid-stream pass the holding.
func (h holding) exceeded(prompt, completion int64) bool {
	if h.maxOutput <= 0 {
		return false
	}
	return completion > h.maxOutput || prompt+completion > h.promptEstimate+h.maxOutput
}

// next returns the next engine event and keeps the token count.
func (r *relay) next() (dispatch.Event, error) {
	ev, err := r.stream.Recv()
	if err != nil {
		return ev, err
	}
	if !r.started {
		r.started = true
		r.onFirst()
	}
	if r.onEvent != nil {
		r.onEvent()
	}
	if hoptrace.On && ev.Tokens > 0 && r.out.CompletionTokens == 0 {
		hoptrace.Mark(r.trace.ID(), hoptrace.GatewayFirst)
	}
	r.out.Relayed.Counted = true
	if ev.Tokens > 0 {
		r.out.Relayed.AddChunk(ev.Text.Bytes, ev.Text.Inner, ev.Text.Tokens, ev.Calls)
		if !r.out.Usage {
			r.out.CompletionTokens = r.out.Relayed.Tokens
		}
	}
	if ev.Usage != nil {
		r.out.Usage = true
		r.out.PromptTokens, r.out.CompletionTokens = ev.Usage.PromptTokens, ev.Usage.CompletionTokens
		return ev, nil // the answer is whole: the settle accounts for it
	}
	r.completion = max(r.completion, r.out.Relayed.Floor())
	if p := ev.Progress; p != nil {
		// The engine's running count as far as the text relayed makes it
		// plausible: a count no tokenizer could give that text neither
		// cuts the stream nor is billed.
		u, _ := ledger.BoundUsage(ledger.Usage{PromptTokens: p.PromptTokens, CompletionTokens: p.CompletionTokens},
			r.out.Relayed, r.held.tolerance())
		r.prompt, r.completion = max(r.prompt, u.PromptTokens), max(r.completion, u.CompletionTokens)
	}
	if r.held.exceeded(r.prompt, r.completion) {
		return ev, errOverReservation
	}
	return ev, nil
}

// streamed relays server-sent events as they arrive, dropping the usage
// chunk the client did not ask for. Between events it waits in wait, not
// in step: the frames an open stream waits in stay small (see
// chatCompletions).
func (r *relay) streamed(wantUsage bool) Outcome {
	r.begin()
	for r.wait(); r.step(wantUsage); r.wait() {
	}
	return r.out
}

// begin commits to 200: the engine accepted the job, so the client gets
// its headers (x-request-id among them) now, or with the first event when
// that is already there; a failure from here on is an error event, as
// vLLM sends it.
func (r *relay) begin() {
	w := r.c.Writer
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	r.flush()
	r.sse = openai.NewSSEWriter(w)
}

// flush sends what was written, unless the stream's next event is already
// there: then it goes out in the same write. A client woken by the headers
// alone, or by the role chunk an engine sends just before the first token,
// would wait again for what follows a moment later; a bare proxy sends
// them together as its upstream's bytes arrive together. Nothing waits
// longer for it: a stream that cannot tell is flushed at once.
func (r *relay) flush() {
	if rd, ok := r.stream.(dispatch.Readier); ok && rd.Ready() {
		r.unflushed = true
		return
	}
	r.c.Writer.Flush()
	r.unflushed = false
	if hoptrace.On && r.out.CompletionTokens > 0 && r.trace.ID() != "" {
		hoptrace.Mark(r.trace.ID(), hoptrace.RelayWrote)
		r.trace.Set("")
	}
}

// ending runs before the answer's end is written: what was held goes out
// now, then onEnd.
func (r *relay) ending() {
	if r.unflushed {
		r.c.Writer.Flush()
		r.unflushed = false
	}
	if r.onEnd != nil {
		r.onEnd(r.out)
	}
}

// wait returns once the stream's next event is there, when the stream can
// say so.
func (r *relay) wait() {
	if w, ok := r.stream.(dispatch.Waiter); ok {
		w.Wait()
	}
}

// step relays the next event; it reports false once the stream ended.
func (r *relay) step(wantUsage bool) bool {
	sse := r.sse
	ev, err := r.next()
	// The answer's end ([DONE], after an error event if any) is written
	// and not flushed: it leaves with the response's own end when the
	// handler returns, in one write, so a client that closes the body at
	// [DONE] has read the whole response and keeps its connection.
	if errors.Is(err, io.EOF) {
		r.ending()
		_ = sse.WriteDone()
		return false
	}
	if errors.Is(err, errOverReservation) {
		r.out.State = Broken
		r.ending()
		_ = sse.WriteJSON(openai.NewError(openai.TypeServer, "reservation_exceeded", "",
			"the engine went past the output this request reserved; the answer is cut here"))
		_ = sse.WriteDone()
		return false
	}
	if err != nil {
		if r.c.Request.Context().Err() != nil {
			r.out.State = ClientGone
			return false
		}
		r.out.State = Broken
		r.ending()
		_ = sse.WriteJSON(brokenEvent(context.Cause(r.ctx)))
		_ = sse.WriteDone()
		return false
	}
	if ev.Usage != nil && !wantUsage {
		if r.unflushed {
			r.flush() // what was held, before waiting for the next event
		}
		return true
	}
	if ev.Err != nil {
		r.out.State = Broken
	}
	if err := sse.WriteData(r.shownUsage(ev)); err != nil {
		r.out.State = ClientGone
		return false
	}
	r.flush()
	return true
}

// shownUsage is the event's data as the client is shown it: the usage an
// engine put on it replaced by what the request is billed (billed) — on
// the final usage chunk, the bill; on a content chunk of a client that
// asked for the running usage, the engine's running count bounded as a
// bill would bound it if the stream ended there. The client never sees
// an engine's own figure: not 2^62, not a negative, not a total that is
// not the sum of what it adds.
func (r *relay) shownUsage(ev dispatch.Event) []byte {
	var usage []byte
	switch {
	case ev.Usage != nil:
		usage = usageJSON(billOf(r.out, r.held).usage)
	case ev.Progress != nil && r.continuous:
		running := ledger.Usage{PromptTokens: ev.Progress.PromptTokens, CompletionTokens: ev.Progress.CompletionTokens}
		u, _ := ledger.BoundUsage(running, r.out.Relayed, r.held.bounds())
		usage = usageJSON(u)
	}
	if r.view == nil {
		return ev.Data
	}
	return r.view.shown(&ev, usage)
}

// brokenEvent is the error event of a stream that broke with cause: the
// request's own limits name themselves; anything else is the engine's
// failure.
func brokenEvent(cause error) *openai.ErrorBody {
	switch {
	case errors.Is(cause, errFirstTokenTimeout):
		return openai.NewError(openai.TypeServer, "first_token_timeout", "", "the engine sent no token in time")
	case errors.Is(cause, context.DeadlineExceeded):
		return openai.NewError(openai.TypeServer, "request_timeout", "", "the request ran past its time limit; the answer is cut here")
	default:
		return openai.NewError(openai.TypeServer, "engine_failed", "", "the engine failed mid-stream")
	}
}

// buffered builds a non-streamed answer from the engine's stream.
func (r *relay) buffered() Outcome {
	var (
		a    = answer{finish: openai.FinishStop}
		resp = openai.ChatCompletion{Object: openai.ObjectChatCompletion}
	)
	for {
		ev, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if r.failBuffered(ev, err) {
			return r.out
		}
		if ev.Usage != nil {
			continue // the answer's usage is what it is billed, below
		}
		a.add(r.shownUsage(ev))
	}
	// The client is told the usage it is billed (billed, the settle's own
	// rule), never an engine's figure.
	if b := billOf(r.out, r.held); b.settle {
		resp.Usage = billedUsage(b.usage)
	}
	resp.ID, resp.Created, resp.Model = a.id, a.created, a.model
	msg := openai.ResponseMessage{Role: "assistant"}
	if text := a.content.String(); text != "" || len(a.calls) == 0 {
		msg.Content = &text // null when the answer is only tool calls, as OpenAI sends it
	}
	if r := a.reasoning.String(); r != "" {
		msg.ReasoningContent = &r
	}
	if len(a.calls) > 0 {
		msg.ToolCalls, _ = json.Marshal(a.calls) // strings and a struct: always encodes
	}
	resp.Choices = []openai.Choice{{
		Message:      msg,
		Logprobs:     openai.Null(),
		FinishReason: a.finish,
	}}
	r.c.JSON(http.StatusOK, resp)
	return r.out
}

// failBuffered answers a non-streamed request whose stream failed — err,
// or an engine's error event — and reports true; false when ev is to be
// taken into the answer. The client gone is answered nothing.
func (r *relay) failBuffered(ev dispatch.Event, err error) bool {
	if errors.Is(err, errOverReservation) {
		r.out.State = Broken
		writeError(r.c, http.StatusBadGateway, openai.NewError(openai.TypeServer, "reservation_exceeded", "",
			"the engine went past the output this request reserved"))
		return true
	}
	if err == nil && ev.Err == nil {
		return false
	}
	r.out.State = Broken
	if r.c.Request.Context().Err() != nil {
		r.out.State = ClientGone
		return true
	}
	if cause := context.Cause(r.ctx); err != nil && (errors.Is(cause, errFirstTokenTimeout) || errors.Is(cause, context.DeadlineExceeded)) {
		writeError(r.c, http.StatusGatewayTimeout, brokenEvent(cause))
		return true
	}
	writeError(r.c, http.StatusBadGateway, openai.NewError(openai.TypeServer, "engine_failed", "", "the engine failed before the answer was complete"))
	return true
}

// toolCallDelta is one streamed piece of a tool call: the first names it,
// the rest add to its arguments.
type toolCallDelta struct {
	Index int `json:"index"`
	toolCall
}

// toolCall is a whole tool call of a non-streamed answer.
type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toolCalls assembles streamed tool-call pieces by their index.
type toolCalls []toolCall

// add merges pieces: an id, type or name sets it, arguments append.
func (t *toolCalls) add(deltas []toolCallDelta) {
	for _, d := range deltas {
		if d.Index < 0 || d.Index > 127 {
			continue // no engine makes that many calls in one answer
		}
		for len(*t) <= d.Index {
			*t = append(*t, toolCall{Type: "function"})
		}
		c := &(*t)[d.Index]
		if d.ID != "" {
			c.ID = d.ID
		}
		if d.Type != "" {
			c.Type = d.Type
		}
		if d.Function.Name != "" {
			c.Function.Name = d.Function.Name
		}
		c.Function.Arguments += d.Function.Arguments
	}
}
