package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// Dispatcher runs one admitted chat completion on an engine.
type Dispatcher interface {
	// Dispatch starts job and returns its stream once the engine has
	// accepted it. The stream ends when ctx ends: cancelling ctx is how the
	// gateway aborts a request (client gone, timeout), and the engine stops
	// generating. Errors are *Error, ErrNoCapacity or ErrUnknownModel.
	Dispatch(ctx context.Context, job *Job) (Stream, error)
}

// Job is one admitted request, as the gateway knows it once admitted: the
// envelope every hop carries, so that none derives it again. It holds no
// OpenAI request to decode: the body is already the engine's, and what
// routing needs of it is counted here.
type Job struct {
	// RequestID is the ledger's key for this request; the engine and the
	// node see it too.
	RequestID string
	// Model is the platform's model name, the routing key.
	Model string
	// PromptEstimate is the gateway's estimate of the prompt in tokens
	// (tokens.EstimateRequest), the one the ledger reserved for.
	PromptEstimate int64
	// MaxOutput is the output cap the engine is sent: the reservation's,
	// or the client's own when nothing capped it (0: none).
	MaxOutput int64
	// Members is the engine's request body after its model: the members
	// that follow "model", from the comma to the closing brace. The body
	// always streams and always asks for usage, whatever the client asked
	// (the gateway needs exact counts, and a non-streamed answer is built
	// from the stream). EngineBody puts a served name in front of it.
	Members []byte
}

// EngineBody is the job's request as an engine answering to servedName
// must see it.
func (j *Job) EngineBody(servedName string) []byte {
	b := make([]byte, 0, len(modelPrefix)+len(servedName)+2+len(j.Members))
	b = append(b, modelPrefix...)
	if plainName(servedName) {
		b = append(append(append(b, '"'), servedName...), '"')
	} else {
		q, _ := json.Marshal(servedName) // a string always marshals
		b = append(b, q...)
	}
	return append(b, j.Members...)
}

// modelPrefix begins every engine body: the model is its first member.
const modelPrefix = `{"model":`

// plainName reports whether a name is printable ASCII that JSON quotes as
// it is (a served name is a model id: it always is).
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// NewJob is the envelope of req, admitted as requestID with the prompt
// estimated at promptEstimate: its engine body is encoded here, once.
func NewJob(requestID string, req *openai.ChatCompletionRequest, promptEstimate int64) (*Job, error) {
	members, err := engineMembers(req)
	if err != nil {
		return nil, err
	}
	return &Job{RequestID: requestID, Model: req.Model, PromptEstimate: promptEstimate,
		MaxOutput: req.MaxOutputTokens(), Members: members}, nil
}

// engineMembers encodes req as an engine must see it — streamed, with
// usage asked for, continuous usage too (a stream that breaks then has
// exact counts to settle from; the gateway strips it from what the client
// did not ask for) — without its model: the members after "model".
func engineMembers(req *openai.ChatCompletionRequest) ([]byte, error) {
	r := *req
	r.Model = ""
	r.Stream = true
	continuous := true
	so := openai.StreamOptions{IncludeUsage: true, ContinuousUsageStats: &continuous}
	r.StreamOptions = &so
	extra := r.Extra
	r.Extra = nil
	// Without its extra members a request encodes in its type's order:
	// "model" first, then "messages", which is never left out.
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode engine request: %w", err)
	}
	const empty = `{"model":""`
	if !bytes.HasPrefix(b, []byte(empty+",")) || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("encode engine request: the model is not its first member")
	}
	members := b[len(empty):]
	if len(extra) == 0 {
		return members, nil
	}
	// The members the type does not name, in the order of their keys.
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]byte, 0, len(members)+64*len(keys))
	out = append(out, members[:len(members)-1]...)
	for _, k := range keys {
		qk, _ := json.Marshal(k) // a string always marshals
		out = append(append(append(append(out, ','), qk...), ':'), extra[k]...)
	}
	return append(out, '}'), nil
}

// Stream is the engine's answer to one job, event by event.
type Stream interface {
	// Recv returns the next event. After the final event it returns
	// io.EOF. When the engine or the link to it fails mid-stream it returns
	// an error wrapping ErrStreamBroken.
	Recv() (Event, error)
	// Close releases the stream and, if it is still running, aborts it on
	// the engine. It is safe to call more than once.
	Close() error
}

// Waiter is a Stream that can wait for its next event apart from taking
// it. The gateway waits through it between events, so that the frames an
// open stream waits in stay small: every open stream keeps its handler
// goroutine, and the garbage collector halves a goroutine's stack only
// when what the goroutine uses while it waits is under a quarter of it.
type Waiter interface {
	// Wait returns once Recv would not block.
	Wait()
}

// Readier is a Stream that can tell, without blocking, whether its next
// event is already there. The gateway then sends a stream's response
// headers in the same write as its first event, as a bare reverse proxy
// does, rather than a moment apart: the client wakes once, not twice.
type Readier interface {
	// Ready reports whether Recv would return at once.
	Ready() bool
}

// Event is one server-sent event from the engine.
type Event struct {
	// Data is the event's JSON payload exactly as the engine sent it, for
	// relaying without re-encoding. It is valid until the next Recv.
	Data []byte
	// Usage is set on the engine's final usage chunk (choices empty).
	Usage *openai.Usage
	// Err is set on a mid-stream error event.
	Err *openai.Error
	// Tokens is how many completion tokens this event carries as far as the
	// platform can tell without a tokenizer: one per content chunk. It backs
	// the partial settle of a stream that breaks before its usage arrives.
	Tokens int64
	// Text is the platform's own count of the output this event carries:
	// the text of its choices' content, reasoning, refusal and tool calls
	// (names and arguments), as a client decodes it, each piece counted
	// alone (tokens.Text). The gateway adds it up for the usage bound
	// (ledger.BoundUsage), so that neither an engine nor a node can bill
	// far from what the client received. Zero without output.
	Text tokens.Text
	// Calls is how many tool calls the event names (a function name that
	// is not empty): each may cost tokens of markup no text shows.
	Calls int64
	// Progress is the engine's running count on a content chunk (vLLM's
	// stream_options.continuous_usage_stats, which dispatchers ask for):
	// the exact prompt and the completion so far. A stream that breaks
	// settles from the last one instead of from Tokens and an estimate.
	Progress *openai.Usage
	// Duplicate is set on an event with two equal keys in one object, or
	// nested too deep to tell: readers disagree on such an event (one
	// keeps the first, another the last), so a client might read in it
	// another text or usage than the platform counted. No engine sends
	// one; the gateway ends the stream there as the engine's failure.
	Duplicate bool
	// ModelValue locates in Data the value of the event's top-level
	// "model" member when it is a string; UsageValue the value of its
	// top-level "usage" member when it is an object, and UsageMember that
	// whole member with one comma beside it. Empty when there is none, or
	// when the event is not an object the parser could read. The gateway
	// rewrites them (Rewrite) without reading the event again.
	ModelValue, UsageValue, UsageMember Span
}

// Span is the bytes [From, To) of an event's Data.
type Span struct{ From, To int }

// Empty reports whether the span holds nothing.
func (s Span) Empty() bool { return s.To <= s.From }

// SpansFit reports whether the event's spans lie within its data, apart,
// the usage value within its member: what Rewrite needs of them. A
// transport that carries spans checks them with it.
func (ev *Event) SpansFit() bool {
	fit := func(s Span) bool {
		return s.Empty() && s.From == 0 && s.To == 0 || 0 <= s.From && s.From < s.To && s.To <= len(ev.Data)
	}
	m, v, u := ev.ModelValue, ev.UsageValue, ev.UsageMember
	if !fit(m) || !fit(v) || !fit(u) || v.Empty() != u.Empty() {
		return false
	}
	if !v.Empty() && (v.From < u.From || v.To > u.To) {
		return false
	}
	return m.Empty() || u.Empty() || m.To <= u.From || u.To <= m.From
}

// Rewrite returns the event's data with its model value replaced by model
// (a JSON string; nil leaves it), its usage value replaced by usage (a
// JSON object; nil leaves it) or, when strip is set, its usage member
// removed; the data itself when nothing changes. It reads nothing of the
// event: the parser located what it edits.
func (ev *Event) Rewrite(model, usage []byte, strip bool) []byte {
	type edit struct {
		at   Span
		with []byte
	}
	var edits [2]edit
	n := 0
	data := ev.Data
	if m := ev.ModelValue; model != nil && !m.Empty() && !bytes.Equal(data[m.From:m.To], model) {
		edits[n] = edit{m, model}
		n++
	}
	switch {
	case ev.UsageValue.Empty():
	case usage != nil:
		edits[n] = edit{ev.UsageValue, usage}
		n++
	case strip:
		edits[n] = edit{ev.UsageMember, nil}
		n++
	}
	if n == 0 {
		return data
	}
	if n == 2 && edits[1].at.From < edits[0].at.From {
		edits[0], edits[1] = edits[1], edits[0]
	}
	size := len(data)
	for _, e := range edits[:n] {
		size += len(e.with) - (e.at.To - e.at.From)
	}
	out := make([]byte, 0, size)
	at := 0
	for _, e := range edits[:n] {
		out = append(append(out, data[at:e.at.From]...), e.with...)
		at = e.at.To
	}
	return append(out, data[at:]...)
}

// Sentinel errors a Dispatcher returns.
var (
	// ErrNoCapacity means no engine serving the model can take the job now;
	// the gateway queues the request or answers 503 with Retry-After.
	ErrNoCapacity = errors.New("dispatch: no capacity for model")
	// ErrUnknownModel means no engine serves the model at all.
	ErrUnknownModel = errors.New("dispatch: no engine serves model")
	// ErrNoHealthyNode means nodes serve the model but every one reports
	// its engine down: waiting in the queue would not help, and the
	// gateway answers 503 no_healthy_node with Retry-After at once.
	ErrNoHealthyNode = errors.New("dispatch: every node of the model reports its engine down")
	// ErrStreamBroken means the stream ended without the engine's [DONE].
	ErrStreamBroken = errors.New("dispatch: stream broken")
)

// Error is an engine's refusal of a job before anything streamed, such as a
// 400 for a context that is too long; the gateway passes its status and
// Body to the client. An engine's own words are never in Body (an upstream
// may be anything a URL reaches): they are in Upstream, for logs.
type Error struct {
	Status int
	Body   *openai.ErrorBody
	// RetryAfter is the engine's Retry-After advice, if it gave one.
	RetryAfter time.Duration
	// Upstream is the start of the engine's error answer, at most
	// MaxUpstreamLog bytes of valid UTF-8, for the server's log only:
	// never sent to a client.
	Upstream string
}

func (e *Error) Error() string {
	if e.Body == nil {
		return fmt.Sprintf("engine answered %d", e.Status)
	}
	return fmt.Sprintf("engine answered %d: %s", e.Status, e.Body.Error.Message)
}
