package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/jsonscan"
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
	if dup, ok := jsonscan.DuplicateKey(ev.Data); dup || (!ok && json.Valid(ev.Data)) {
		// Too deep to check is refused too: no engine nests that deep.
		s.dupKey = true
		return dispatch.Event{}, errDuplicateKey
	}
	if ev.Err != nil {
		return ev, nil
	}
	return s.show(ev), nil
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

// show is what the client sees of ev. It is apart from Recv so that the
// frame a stream waits in stays small (see chatCompletions).
func (s *clientView) show(ev dispatch.Event) dispatch.Event {
	strip := false
	if ev.Progress != nil {
		u := *ev.Progress
		s.progress = &u
		strip = !s.continuous
	}
	ev.Data = rewriteChunk(ev.Data, s.quoted, nil, strip)
	return ev
}

// maxChunkEdits bounds the edits rewriteChunk makes to one chunk: a
// chunk has one model and one usage; one written with more is passed as
// it came rather than rewritten at a cost that grows with it.
const maxChunkEdits = 4

// chunkEdit replaces chunk[from:to] with with.
type chunkEdit struct {
	from, to int
	with     []byte
}

// rewriteChunk returns chunk with the value of each top-level "model"
// member that is a string replaced by quoted (unless quoted is nil), each
// top-level "usage" member that is an object replaced by usage (unless
// usage is nil) or else, when strip is set, removed with its comma; or
// chunk itself when nothing changes, or when
// chunk is not a JSON object. The chunk is read by its structure, in one
// jsonscan pass, so the engine's spacing and member order do not matter
// (an engine written in Python writes "model": "x"), and text that
// mentions "model" or "usage" is never taken for a member. A key spelled
// with escapes is left as it came.
func rewriteChunk(chunk, quoted, usage []byte, strip bool) []byte {
	var edits [maxChunkEdits]chunkEdit
	n := 0
	kept := -1     // where the last member kept ends
	dropping := -1 // where a dropped first member starts, until the next member's key
	o := jsonscan.Members(chunk)
	for k, v, more := o.Next(); more; k, v, more = o.Next() {
		keyAt := offsetIn(chunk, k) - 1 // its opening quote
		if dropping >= 0 {
			edits[n] = chunkEdit{from: dropping, to: keyAt}
			n, dropping = n+1, -1
		}
		start := offsetIn(chunk, v)
		end := start + len(v)
		if n >= len(edits)-1 {
			return chunk
		}
		switch {
		case quoted != nil && string(k) == "model" && v[0] == '"':
			if !bytes.Equal(v, quoted) {
				edits[n] = chunkEdit{from: start, to: end, with: quoted}
				n++
			}
		case usage != nil && string(k) == "usage" && v[0] == '{':
			edits[n] = chunkEdit{from: start, to: end, with: usage}
			n++
		case strip && string(k) == "usage" && v[0] == '{':
			if kept < 0 {
				dropping = keyAt // up to the next member, its comma with it
				continue
			}
			edits[n] = chunkEdit{from: kept, to: end} // the comma before it too
			n++
		}
		kept = end
	}
	if o.Malformed() {
		return chunk
	}
	if dropping >= 0 { // the only member left: up to the closing brace
		edits[n] = chunkEdit{from: dropping, to: bytes.LastIndexByte(chunk, '}')}
		n++
	}
	if n == 0 {
		return chunk
	}
	size := len(chunk)
	for _, e := range edits[:n] {
		size += len(e.with) - (e.to - e.from)
	}
	out := make([]byte, 0, size)
	at := 0
	for _, e := range edits[:n] {
		out = append(append(out, chunk[at:e.from]...), e.with...)
		at = e.to
	}
	return append(out, chunk[at:]...)
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

// offsetIn is where part, a subslice jsonscan returned, starts in whole.
func offsetIn(whole, part []byte) int { return cap(whole) - cap(part) }
