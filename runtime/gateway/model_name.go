package gateway

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/openai"
)

// clientView shows the client the answer it asked for: the model it named,
// not the engine's served name ("sim-8b", "meta-llama/Llama-3.1-8B-Instruct"),
// which is the platform's business; and the running usage the platform
// asks engines for on every chunk only when the client asked for it too.
// It keeps the last running count, for the settle of a stream that breaks.
// An event with a duplicate key never reaches the client (errDuplicateKey).
type clientView struct {
	dispatch.Stream
	quoted     []byte // the platform model's name as a JSON string
	continuous bool   // the client asked for continuous usage stats
	progress   *openai.Usage
	dupKey     bool // the engine sent an event with a duplicate key: the stream ended there
}

// errDuplicateKey ends a stream whose engine sent an event with two equal
// keys in one object. Readers disagree on such an event (encoding/json
// keeps the last, others the first), so the client might read in it
// another text, or another usage, than the platform counted and billed;
// no engine sends one (vLLM writes its events from Python dicts), so the
// one that does is broken or hostile, and its answer ends as an engine
// failure, billed for what was relayed before it.
var errDuplicateKey = fmt.Errorf("%w: the engine sent an event with a duplicate key", dispatch.ErrStreamBroken)

// newClientView wraps st for a request for model; continuous says whether
// the client asked for a running usage on every chunk.
func newClientView(st dispatch.Stream, model string, continuous bool) *clientView {
	quoted, _ := json.Marshal(model) // a string always marshals
	return &clientView{Stream: st, quoted: quoted, continuous: continuous}
}

// wantsContinuousUsage reports whether a request asked for vLLM's running
// usage on every chunk.
func wantsContinuousUsage(req *openai.ChatCompletionRequest) bool {
	so := req.StreamOptions
	return so != nil && so.IncludeUsage && so.ContinuousUsageStats != nil && *so.ContinuousUsageStats
}

// Recv implements dispatch.Stream.
func (s *clientView) Recv() (dispatch.Event, error) {
	ev, err := s.Stream.Recv()
	if err != nil {
		return ev, err
	}
	if ev.Duplicate {
		s.dupKey = true
		return dispatch.Event{}, errDuplicateKey
	}
	if ev.Progress != nil {
		u := *ev.Progress
		s.progress = &u
	}
	return ev, nil
}

// Wait implements dispatch.Waiter for the streams that do.
func (s *clientView) Wait() {
	if w, ok := s.Stream.(dispatch.Waiter); ok {
		w.Wait()
	}
}

// Ready implements dispatch.Readier: false for the streams that cannot tell.
func (s *clientView) Ready() bool {
	r, ok := s.Stream.(dispatch.Readier)
	return ok && r.Ready()
}

// shown is what the client sees of ev: the model it named; usage (a usage
// object, the bill) in place of the engine's, or no running usage when it
// did not ask for one. It edits where the parser located the members and
// reads nothing of the event. An error event is shown as it came.
func (s *clientView) shown(ev *dispatch.Event, usage []byte) []byte {
	if ev.Err != nil {
		return ev.Data
	}
	strip := usage == nil && ev.Progress != nil && !s.continuous
	return ev.Rewrite(s.quoted, usage, strip)
}

// usageJSON is u as a usage object, its total the sum (saturating: never
// negative) of what it adds.
func usageJSON(u ledger.Usage) []byte {
	b := make([]byte, 0, 96)
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, u.PromptTokens, 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, u.CompletionTokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, addSaturating(u.PromptTokens, u.CompletionTokens), 10)
	return append(b, '}')
}

// billedUsage is u as a non-streamed answer's usage.
func billedUsage(u ledger.Usage) *openai.Usage {
	return &openai.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		TotalTokens: addSaturating(u.PromptTokens, u.CompletionTokens)}
}
