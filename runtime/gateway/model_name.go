package gateway

import (
	"bytes"
	"encoding/json"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/openai"
)

// clientView shows the client the answer it asked for: the model it named,
// not the engine's served name ("sim-8b", "meta-llama/Llama-3.1-8B-Instruct"),
// which is the platform's business; and the running usage the platform
// asks engines for on every chunk only when the client asked for it too.
// It keeps the last running count, for the settle of a stream that breaks.
type clientView struct {
	dispatch.Stream
	quoted     []byte // the platform model's name as a JSON string
	continuous bool   // the client asked for continuous usage stats
	progress   *openai.Usage
}

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
	if err != nil || ev.Err != nil {
		return ev, err
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
	if ev.Progress != nil {
		u := *ev.Progress
		s.progress = &u
		if !s.continuous {
			ev.Data = stripUsage(ev.Data)
		}
	}
	ev.Data = renameModel(ev.Data, s.quoted)
	return ev
}

// stripUsage returns chunk without its "usage" member (an object of
// numbers and nested objects), or chunk itself when it has none or its
// shape is not understood.
func stripUsage(chunk []byte) []byte {
	i, start, ok := memberValue(chunk, `"usage":`, '{')
	if !ok {
		return chunk
	}
	end, depth := start, 0
	for ; end < len(chunk); end++ {
		switch chunk[end] {
		case '"':
			for end++; end < len(chunk) && chunk[end] != '"'; end++ {
				if chunk[end] == '\\' {
					end++
				}
			}
		case '{':
			depth++
		case '}':
			depth--
		}
		if depth == 0 {
			break
		}
	}
	if depth != 0 {
		return chunk
	}
	end++ // past the closing brace
	// Take the comma on one side with the member.
	from, to := i, end
	if j := lastNonSpace(chunk[:from]); j >= 0 && chunk[j] == ',' {
		from = j
	} else if k := firstNonSpace(chunk[to:]); k >= 0 && chunk[to+k] == ',' {
		to += k + 1
	} else {
		return chunk
	}
	out := make([]byte, 0, len(chunk)-(to-from))
	out = append(out, chunk[:from]...)
	return append(out, chunk[to:]...)
}

func lastNonSpace(b []byte) int {
	for j := len(b) - 1; j >= 0; j-- {
		if b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			return j
		}
	}
	return -1
}

func firstNonSpace(b []byte) int {
	for k, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return k
		}
	}
	return -1
}

// renameModel returns chunk with the value of its "model" member replaced
// by quoted, or chunk itself when it has none or already names it. In a
// chat completion chunk only the top-level object has a "model" member,
// and the raw bytes `"model":` cannot occur inside a JSON string (its
// quotes would be escaped), so the first occurrence is the member.
func renameModel(chunk, quoted []byte) []byte {
	_, start, ok := memberValue(chunk, `"model":`, '"')
	if !ok {
		return chunk
	}
	end := start + 1
	for end < len(chunk) && chunk[end] != '"' {
		if chunk[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(chunk) {
		return chunk
	}
	end++ // past the closing quote
	if bytes.Equal(chunk[start:end], quoted) {
		return chunk
	}
	out := make([]byte, 0, len(chunk)-(end-start)+len(quoted))
	out = append(out, chunk[:start]...)
	out = append(out, quoted...)
	return append(out, chunk[end:]...)
}

// memberValue finds the first member key (with its quotes and colon) in
// chunk and returns where the key and its value start, when the value
// starts with open ('{' for an object, '"' for a string).
func memberValue(chunk []byte, key string, open byte) (keyAt, start int, ok bool) {
	keyAt = bytes.Index(chunk, []byte(key))
	if keyAt < 0 {
		return 0, 0, false
	}
	start = keyAt + len(key)
	for start < len(chunk) && (chunk[start] == ' ' || chunk[start] == '\t') {
		start++
	}
	if start >= len(chunk) || chunk[start] != open {
		return 0, 0, false
	}
	return keyAt, start, true
}
