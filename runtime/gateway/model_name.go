package gateway

import (
	"bytes"
	"encoding/json"

	"github.com/llmplat/llmplat/runtime/dispatch"
)

// modelNamedStream shows the client the model it asked for: an engine
// answers with its served name ("sim-8b", "meta-llama/Llama-3.1-8B-Instruct"),
// which is the platform's business, not the client's.
type modelNamedStream struct {
	dispatch.Stream
	quoted []byte // the platform model's name as a JSON string
}

// withModelName wraps st so every chunk names model.
func withModelName(st dispatch.Stream, model string) dispatch.Stream {
	quoted, err := json.Marshal(model)
	if err != nil {
		return st
	}
	return &modelNamedStream{Stream: st, quoted: quoted}
}

// Recv implements dispatch.Stream.
func (s *modelNamedStream) Recv() (dispatch.Event, error) {
	ev, err := s.Stream.Recv()
	if err == nil && ev.Err == nil {
		ev.Data = renameModel(ev.Data, s.quoted)
	}
	return ev, err
}

// renameModel returns chunk with the value of its "model" member replaced
// by quoted, or chunk itself when it has none or already names it. In a
// chat completion chunk only the top-level object has a "model" member,
// and the raw bytes `"model":` cannot occur inside a JSON string (its
// quotes would be escaped), so the first occurrence is the member.
func renameModel(chunk, quoted []byte) []byte {
	const key = `"model":`
	i := bytes.Index(chunk, []byte(key))
	if i < 0 {
		return chunk
	}
	start := i + len(key)
	for start < len(chunk) && (chunk[start] == ' ' || chunk[start] == '\t') {
		start++
	}
	if start >= len(chunk) || chunk[start] != '"' {
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
