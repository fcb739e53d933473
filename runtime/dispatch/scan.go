package dispatch

import (
	"bytes"
	"encoding/json"

	"github.com/llmplat/llmplat/runtime/jsonscan"
	"github.com/llmplat/llmplat/runtime/openai"
)

// An engine sends every event of every stream through ParseEvent, twice
// on the socket path (the agent, then the orchestrator), and with
// continuous usage every event has a usage object. Decoding each with
// encoding/json was one of the platform's largest costs per request. The
// functions here read the common event in place instead: encoding/json
// only checks that the event is valid JSON (json.Valid allocates
// nothing), then a walk of the event's structure finds what ParseEvent
// needs. Anything unusual — a key written with escapes or non-ASCII
// bytes, a key encoding/json would match case-insensitively, a duplicate,
// a number that is not a plain integer — makes them give up, and the
// encoding/json path decides, as before. FuzzParseEventMatchesDecode
// holds the two paths to the same answers.

// eventFields returns an event's top-level choices (raw, nil when absent)
// and usage (nil when absent or null), as ParseEvent's decode into
// {Choices json.RawMessage; Usage *openai.Usage} gives them; ok is false
// when the event is not one it reads. valid says data is known to be
// valid JSON, which the walk needs.
func eventFields(data []byte, valid bool) (choices json.RawMessage, usage *openai.Usage, ok bool) {
	if !valid && !json.Valid(data) {
		return nil, nil, false
	}
	w := walker{data: data}
	w.space()
	if !w.is('{') {
		return nil, nil, false
	}
	var sawChoices, sawUsage bool
	ok = w.members(func(key []byte, start, end int) bool {
		switch {
		case string(key) == "choices":
			if sawChoices {
				return false
			}
			sawChoices, choices = true, data[start:end]
		case string(key) == "usage":
			if sawUsage {
				return false
			}
			sawUsage = true
			if string(data[start:end]) == "null" {
				return true
			}
			u, ok := usageOf(data[start:end])
			if !ok {
				return false
			}
			usage = u
		case bytes.EqualFold(key, []byte("choices")), bytes.EqualFold(key, []byte("usage")):
			return false // encoding/json would read it as the field
		}
		return true
	})
	if !ok {
		return nil, nil, false
	}
	return choices, usage, true
}

// usageOf reads a usage object whose members are plain integers.
func usageOf(obj []byte) (*openai.Usage, bool) {
	w := walker{data: obj}
	if !w.is('{') {
		return nil, false
	}
	u := &openai.Usage{}
	var seen [3]bool
	ok := w.members(func(key []byte, start, end int) bool {
		var i int
		var dst *int64
		switch string(key) {
		case "prompt_tokens":
			i, dst = 0, &u.PromptTokens
		case "total_tokens":
			i, dst = 1, &u.TotalTokens
		case "completion_tokens":
			i, dst = 2, &u.CompletionTokens
		default:
			return !bytes.EqualFold(key, []byte("prompt_tokens")) && !bytes.EqualFold(key, []byte("total_tokens")) &&
				!bytes.EqualFold(key, []byte("completion_tokens"))
		}
		n, ok := plainInt(obj[start:end])
		if !ok || seen[i] {
			return false
		}
		seen[i], *dst = true, n
		return true
	})
	return u, ok
}

// plainInt parses a non-negative integer without sign, exponent or
// leading zero, of at most 18 digits (no overflow).
func plainInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// otherOutput is hasOtherOutput read in place; ok is false when the
// choices are not ones it reads.
func otherOutput(choices []byte) (found, ok bool) {
	w := walker{data: choices}
	if !w.is('[') {
		return false, false
	}
	ok = w.elements(func(start, end int) bool {
		e := walker{data: choices[:end], pos: start}
		if !e.is('{') {
			return false
		}
		sawDelta := false
		return e.members(func(key []byte, vs, ve int) bool {
			switch {
			case string(key) == "delta":
				if sawDelta {
					return false
				}
				sawDelta = true
				v := choices[vs:ve]
				if string(v) == "null" {
					return true
				}
				d := walker{data: v}
				if !d.is('{') {
					return false
				}
				var keys [][]byte
				return d.members(func(k []byte, ks, ke int) bool {
					for _, seen := range keys {
						if bytes.Equal(seen, k) {
							return false // a map keeps the last: let encoding/json say
						}
					}
					keys = append(keys, k)
					if string(k) == "role" {
						return true
					}
					switch string(v[ks:ke]) {
					case "null", `""`, "[]", "{}":
					default:
						found = true
					}
					return true
				})
			case bytes.EqualFold(key, []byte("delta")):
				return false
			}
			return true
		})
	})
	if !ok {
		return false, false
	}
	return found, true
}

// walker steps through a document encoding/json has found valid.
type walker struct {
	data []byte
	pos  int
}

func (w *walker) space() {
	for w.pos < len(w.data) {
		switch w.data[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

// is reports whether the next byte is c, and steps past it when it is.
func (w *walker) is(c byte) bool {
	w.space()
	if w.pos < len(w.data) && w.data[w.pos] == c {
		w.pos++
		return true
	}
	return false
}

// members calls fn with each member's key (raw: no escapes, ASCII only,
// else members fails) and value span of the object whose '{' was read,
// until fn returns false.
func (w *walker) members(fn func(key []byte, start, end int) bool) bool {
	if w.is('}') {
		return true
	}
	for {
		w.space()
		ks := w.pos + 1
		if !w.skipString() {
			return false
		}
		key := w.data[ks : w.pos-1]
		for _, c := range key {
			if c == '\\' || c >= 0x80 {
				return false
			}
		}
		if !w.is(':') {
			return false
		}
		w.space()
		vs := w.pos
		if !w.skipValue() {
			return false
		}
		if !fn(key, vs, w.pos) {
			return false
		}
		if w.is(',') {
			continue
		}
		return w.is('}')
	}
}

// elements calls fn with each element's span of the array whose '[' was
// read, until fn returns false.
func (w *walker) elements(fn func(start, end int) bool) bool {
	if w.is(']') {
		return true
	}
	for {
		w.space()
		vs := w.pos
		if !w.skipValue() || !fn(vs, w.pos) {
			return false
		}
		if w.is(',') {
			continue
		}
		return w.is(']')
	}
}

// skipString steps past the string that starts at pos.
func (w *walker) skipString() bool {
	if w.pos >= len(w.data) || w.data[w.pos] != '"' {
		return false
	}
	for i := w.pos + 1; i < len(w.data); i++ {
		switch w.data[i] {
		case '\\':
			i++
		case '"':
			w.pos = i + 1
			return true
		}
	}
	return false
}

// skipValue steps past the value that starts at pos.
func (w *walker) skipValue() bool {
	if w.pos >= len(w.data) {
		return false
	}
	switch w.data[w.pos] {
	case '"':
		return w.skipString()
	case '{', '[':
		return w.skipContainer()
	}
	// A number or a literal: up to the next delimiter.
	start := w.pos
	for w.pos < len(w.data) {
		switch w.data[w.pos] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return w.pos > start
		}
		w.pos++
	}
	return w.pos > start
}

// skipContainer steps past the object or array that starts at pos: the
// document is valid, so counting brackets outside strings finds its end.
func (w *walker) skipContainer() bool {
	depth := 0
	for i := w.pos; i < len(w.data); i++ {
		switch w.data[i] {
		case '"':
			w.pos = i
			if !w.skipString() {
				return false
			}
			i = w.pos - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				w.pos = i + 1
				return true
			}
		}
	}
	return false
}

// StreamsWithUsage reports whether an engine request certainly asks for a
// stream with its usage ("stream": true and stream_options.include_usage
// true, as encoding/json reads them): EngineBody's form. False means
// unsure, not no: decode the body to know.
func StreamsWithUsage(body []byte) bool {
	if !json.Valid(body) {
		return false
	}
	w := walker{data: body}
	if !w.is('{') {
		return false
	}
	var stream, usage, sawStream, sawOpts bool
	ok := w.members(func(key []byte, start, end int) bool {
		switch {
		case string(key) == "stream":
			if sawStream {
				return false
			}
			sawStream, stream = true, string(body[start:end]) == "true"
		case string(key) == "stream_options":
			if sawOpts {
				return false
			}
			sawOpts = true
			usage = includesUsage(body[start:end])
		case bytes.EqualFold(key, []byte("stream")), bytes.EqualFold(key, []byte("stream_options")):
			return false
		}
		return true
	})
	return ok && stream && usage
}

// includesUsage reports whether stream options certainly have
// "include_usage": true.
func includesUsage(opts []byte) bool {
	w := walker{data: opts}
	if !w.is('{') {
		return false
	}
	var usage, saw bool
	ok := w.members(func(key []byte, start, end int) bool {
		switch {
		case string(key) == "include_usage":
			if saw {
				return false
			}
			saw, usage = true, string(opts[start:end]) == "true"
		case bytes.EqualFold(key, []byte("include_usage")):
			return false
		}
		return true
	})
	return ok && usage
}

// FinishReason returns the first finish reason among an event's choices,
// read in place; ok is false when it is unsure (a key written with
// escapes or in another case, a duplicate, a reason that is not null or
// a plain string — one with an escape or invalid UTF-8 — an event that
// is not valid JSON), and the event must be decoded to know. Only the
// choices' finish reasons are read: an event whose other fields have
// types a decode would refuse still gives its reason.
func FinishReason(data []byte) (reason string, ok bool) {
	if !json.Valid(data) {
		return "", false
	}
	w := walker{data: data}
	if !w.is('{') {
		return "", false
	}
	found, sawChoices := false, false
	ok = w.members(func(key []byte, start, end int) bool {
		switch {
		case string(key) == "choices":
			if sawChoices {
				return false
			}
			sawChoices = true
			var r string
			r, found, ok = firstReason(data[start:end])
			reason = r
			return ok
		case bytes.EqualFold(key, []byte("choices")):
			return false
		}
		return true
	})
	if !ok {
		return "", false
	}
	if !found {
		return "", true
	}
	return reason, true
}

// firstReason returns the first non-null finish_reason of choices.
func firstReason(choices []byte) (reason string, found, ok bool) {
	w := walker{data: choices}
	if string(choices) == "null" {
		return "", false, true
	}
	if !w.is('[') {
		return "", false, false
	}
	ok = w.elements(func(start, end int) bool {
		e := walker{data: choices[:end], pos: start}
		if !e.is('{') {
			return false
		}
		var saw bool
		var r []byte
		if !e.members(func(key []byte, vs, ve int) bool {
			switch {
			case string(key) == "finish_reason":
				if saw {
					return false
				}
				saw, r = true, choices[vs:ve]
			case bytes.EqualFold(key, []byte("finish_reason")):
				return false
			}
			return true
		}) {
			return false
		}
		if !saw || string(r) == "null" || found {
			return true
		}
		lit, plain := jsonscan.Literal(r)
		if !plain {
			return false
		}
		reason, found = string(lit), true
		return true
	})
	return reason, found, ok
}
