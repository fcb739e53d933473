package gateway

import (
	"encoding/json"
	"strings"

	"github.com/llmplat/llmplat/runtime/jsonscan"
)

// answer assembles a non-streamed answer from the engine's chunks. Each
// chunk is scanned in place, without encoding/json; only unusual ones
// (odd shapes, escaped or case-variant keys, duplicates, tool calls) are
// decoded, with the same result.
type answer struct {
	id, model          string
	created            int64
	content, reasoning strings.Builder
	calls              toolCalls
	finish             string
}

// add takes one chunk's id, model, text, tool calls and finish reason. A
// chunk that does not decode is skipped whole.
func (a *answer) add(data []byte) {
	c, ok := scanChunk(data)
	if !ok {
		a.addDecoded(data)
		return
	}
	setString(&a.id, c.id)
	setString(&a.model, c.model)
	a.created = c.created
	ch := jsonscan.Elements(c.choices)
	for v, more := ch.Next(); more; v, more = ch.Next() {
		if jsonscan.IsNull(v) {
			continue
		}
		o := jsonscan.Members(v)
		for k, v, more := o.Next(); more; k, v, more = o.Next() {
			switch i, _ := jsonscan.Match(k, bufferedChoiceFields); {
			case i == 0 && !jsonscan.IsNull(v):
				a.addDelta(v)
			case i == 1 && !jsonscan.IsNull(v):
				setString(&a.finish, v)
			}
		}
	}
}

// addDelta appends a checked delta's text.
func (a *answer) addDelta(delta []byte) {
	o := jsonscan.Members(delta)
	for k, v, more := o.Next(); more; k, v, more = o.Next() {
		switch i, _ := jsonscan.Match(k, bufferedDeltaFields); {
		case i == 0 && !jsonscan.IsNull(v):
			appendString(&a.content, v)
		case i == 1 && !jsonscan.IsNull(v):
			appendString(&a.reasoning, v)
		}
	}
}

// addDecoded is add by encoding/json, for the chunks the scan leaves to it.
func (a *answer) addDecoded(data []byte) {
	var chunk struct {
		ID      string `json:"id"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Delta struct {
				Content          *string         `json:"content"`
				ReasoningContent *string         `json:"reasoning_content"`
				ToolCalls        []toolCallDelta `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &chunk) != nil {
		return
	}
	a.id, a.created, a.model = chunk.ID, chunk.Created, chunk.Model
	for _, ch := range chunk.Choices {
		if ch.Delta.Content != nil {
			a.content.WriteString(*ch.Delta.Content)
		}
		if ch.Delta.ReasoningContent != nil {
			a.reasoning.WriteString(*ch.Delta.ReasoningContent)
		}
		a.calls.add(ch.Delta.ToolCalls)
		if ch.FinishReason != nil {
			a.finish = *ch.FinishReason
		}
	}
}

// The JSON names addDecoded's chunk struct reads, in the order their
// indexes are matched.
var (
	bufferedChunkFields  = []string{"id", "created", "model", "choices"}
	bufferedChoiceFields = []string{"delta", "finish_reason"}
	bufferedDeltaFields  = []string{"content", "reasoning_content", "tool_calls"}
)

// chunkSpans are a checked chunk's top-level fields, raw.
type chunkSpans struct {
	id, model, choices []byte
	created            int64
}

// scanChunk checks that a chunk decodes as addDecoded decodes it, and that
// it has no tool calls: their pieces are rare enough to decode. It
// reports false when only encoding/json can tell.
func scanChunk(data []byte) (c chunkSpans, ok bool) {
	var seen [4]bool
	o := jsonscan.Members(data)
	for k, v, more := o.Next(); more; k, v, more = o.Next() {
		i, known := jsonscan.Match(k, bufferedChunkFields)
		switch {
		case !known:
			return c, false
		case i < 0:
			continue
		case seen[i]:
			return c, false
		}
		seen[i] = true
		switch i {
		case 0:
			c.id, ok = v, isString(v)
		case 1:
			c.created, ok = jsonscan.Int(v)
			ok = ok || jsonscan.IsNull(v)
		case 2:
			c.model, ok = v, isString(v)
		case 3:
			c.choices, ok = v, scanBufferedChoices(v)
		}
		if !ok {
			return c, false
		}
	}
	return c, !o.Malformed()
}

// scanBufferedChoices checks a chunk's choices.
func scanBufferedChoices(v []byte) bool {
	if jsonscan.IsNull(v) {
		return true
	}
	a := jsonscan.Elements(v)
	for ch, more := a.Next(); more; ch, more = a.Next() {
		if !jsonscan.IsNull(ch) && !scanFields(ch, bufferedChoiceFields, checkChoiceField) {
			return false
		}
	}
	return !a.Malformed()
}

func checkChoiceField(i int, v []byte) bool {
	if i == 0 {
		return jsonscan.IsNull(v) || scanFields(v, bufferedDeltaFields, checkDeltaField)
	}
	return isString(v)
}

func checkDeltaField(i int, v []byte) bool {
	if i == 2 {
		return jsonscan.IsNull(v) // tool calls are decoded
	}
	return isString(v)
}

// scanFields checks an object decoded into a struct with the given field
// names: each field once, its value as check accepts it.
func scanFields(obj []byte, names []string, check func(i int, v []byte) bool) bool {
	var seen [4]bool
	o := jsonscan.Members(obj)
	for k, v, more := o.Next(); more; k, v, more = o.Next() {
		i, known := jsonscan.Match(k, names)
		switch {
		case !known:
			return false
		case i < 0:
			continue
		case seen[i] || !check(i, v):
			return false
		}
		seen[i] = true
	}
	return !o.Malformed()
}

// isString reports whether v decodes into a string without error: null
// decodes into any field.
func isString(v []byte) bool { return jsonscan.IsNull(v) || v[0] == '"' }

// setString sets *s to what a string span decodes to ("" for null or
// none), copying only when it changed: a stream's chunks repeat their id
// and model.
func setString(s *string, v []byte) {
	if lit, ok := jsonscan.Literal(v); ok {
		if *s != string(lit) {
			*s = string(lit)
		}
		return
	}
	if len(v) == 0 || jsonscan.IsNull(v) {
		*s = ""
		return
	}
	b, _ := jsonscan.AppendString(nil, v)
	*s = string(b)
}

// appendString appends what a string span decodes to.
func appendString(sb *strings.Builder, v []byte) {
	if lit, ok := jsonscan.Literal(v); ok {
		sb.Write(lit)
		return
	}
	b, _ := jsonscan.AppendString(nil, v)
	sb.Write(b)
}
