package dispatch

import (
	"context"
	"errors"
	"fmt"
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

// Job is one admitted request.
type Job struct {
	// RequestID is the ledger's key for this request; the engine and the
	// node see it too.
	RequestID string
	// Model is the platform's model name, the routing key.
	Model string
	// Request is the body to forward. The dispatcher always streams from the
	// engine and always asks for usage, whatever the client asked: the
	// gateway needs the exact counts, and a non-streamed answer is built
	// from the stream.
	Request *openai.ChatCompletionRequest
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
