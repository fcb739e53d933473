package engineclient

import (
	"bytes"

	"github.com/llmplat/llmplat/runtime/jsonscan"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// Every event of every stream is classified (Classify): once by the
// platform, in ParseEvent at the orchestrator, and on the socket path once
// more by the node agent for its own done record; and with continuous
// usage every event has a usage object. Decoding each with encoding/json
// was one of the platform's largest costs per request. The functions here
// read the event in place instead, with jsonscan, which checks the whole
// event as it walks it and finds what Classify needs in one pass, by the
// event's structure: spaces, indents and the order of members change
// nothing, as they change nothing for encoding/json. Anything unusual — a
// key written with escapes or non-ASCII bytes, a key encoding/json would
// match case-insensitively, a duplicate, a count that is not a plain
// integer, nesting past jsonscan.MaxDepth — makes them give up, and the
// encoding/json path decides, as before. FuzzParseEventMatchesDecode holds
// the two paths to the same answers.

// eventRead is what ParseEvent needs to know of an event.
type eventRead struct {
	usage     *openai.Usage // nil when absent or null
	noChoices bool          // the choices are an empty array: the final usage chunk
	output    bool          // a choice's delta carries generated output
	said      said          // what the deltas' output says
}

// said is the text a chunk's deltas carry, counted (Event.Text), and the
// tool calls they name (Event.Calls).
type said struct {
	text  tokens.Text
	calls int64
}

// textNames are the members of a delta whose string values are text the
// model generated; toolCallsName and functionCallName hold calls.
var textNames = [...]string{"content", "reasoning_content", "reasoning", "refusal"}

const (
	toolCallsName    = "tool_calls"
	functionCallName = "function_call"
)

// readEvent reads an event in place, as decodeEvent would read it,
// whitespace and member order being nothing to either; ok is false when
// the event is not one it reads, malformed ones included: the scan checks
// the whole event as it goes.
func readEvent(data []byte) (r eventRead, ok bool) {
	var sawChoices, sawUsage bool
	o := jsonscan.Members(data)
	for key, v, more := o.Next(); more; key, v, more = o.Next() {
		i, plain := jsonscan.Match(key, eventNames)
		switch {
		case !plain:
			return eventRead{}, false
		case i == 0:
			if sawChoices {
				return eventRead{}, false
			}
			sawChoices = true
			if jsonscan.IsNull(v) {
				continue
			}
			if r.output, r.said, ok = otherOutput(v); !ok {
				return eventRead{}, false
			}
			r.noChoices = jsonscan.IsEmptyArray(v)
		case i == 1:
			if sawUsage {
				return eventRead{}, false
			}
			sawUsage = true
			if jsonscan.IsNull(v) {
				continue
			}
			if r.usage, ok = usageOf(v); !ok {
				return eventRead{}, false
			}
		}
	}
	if o.Malformed() {
		return eventRead{}, false
	}
	return r, true
}

var (
	eventNames        = []string{"choices", "usage"}
	usageNames        = []string{"prompt_tokens", "completion_tokens", "total_tokens"}
	deltaNames        = []string{"delta"}
	streamNames       = []string{"stream", "stream_options"}
	includeUsageNames = []string{"include_usage"}
	choicesNames      = []string{"choices"}
	finishReasonNames = []string{"finish_reason"}
	toolCallNames     = []string{"function"}
	functionNames     = []string{"name", "arguments"}
)

// usageOf reads a usage object whose counts are integers, none negative
// (a count no engine sends is left to the decode).
func usageOf(obj []byte) (*openai.Usage, bool) {
	u := &openai.Usage{}
	dst := [...]*int64{&u.PromptTokens, &u.CompletionTokens, &u.TotalTokens}
	var seen [len(dst)]bool
	o := jsonscan.Members(obj)
	for key, v, more := o.Next(); more; key, v, more = o.Next() {
		i, plain := jsonscan.Match(key, usageNames)
		if !plain {
			return nil, false
		}
		if i < 0 {
			continue
		}
		n, ok := jsonscan.Int(v)
		if !ok || n < 0 || seen[i] {
			return nil, false
		}
		seen[i], *dst[i] = true, n
	}
	return u, !o.Malformed()
}

// otherOutput is hasOtherOutput read in place, with what the output
// says; ok is false when the choices are not ones it reads.
func otherOutput(choices []byte) (found bool, sd said, ok bool) {
	a := jsonscan.Elements(choices)
	for c, more := a.Next(); more; c, more = a.Next() {
		f, ok := choiceOutput(c, &sd)
		if !ok {
			return false, said{}, false
		}
		found = found || f
	}
	if a.Malformed() {
		return false, said{}, false
	}
	return found, sd, true
}

// choiceOutput reports whether one choice's delta carries output, and
// adds what it says to sd.
func choiceOutput(choice []byte, sd *said) (found, ok bool) {
	sawDelta := false
	o := jsonscan.Members(choice)
	for key, v, more := o.Next(); more; key, v, more = o.Next() {
		i, plain := jsonscan.Match(key, deltaNames)
		switch {
		case !plain:
			return false, false
		case i < 0:
			continue
		case sawDelta:
			return false, false
		}
		sawDelta = true
		if jsonscan.IsNull(v) {
			continue
		}
		if found, ok = deltaOutput(v, sd); !ok {
			return false, false
		}
	}
	if o.Malformed() {
		return false, false
	}
	return found, true
}

// deltaOutput reports whether a delta has a member other than the role
// that is not empty, and adds what its text and calls say to sd. The
// decode reads the delta into a map, which keeps the last of two equal
// keys: a duplicate is left to it.
func deltaOutput(delta []byte, sd *said) (found, ok bool) {
	var keys [][]byte
	var own said
	o := jsonscan.Members(delta)
	for k, v, more := o.Next(); more; k, v, more = o.Next() {
		if !jsonscan.Plain(k) {
			return false, false
		}
		for _, seen := range keys {
			if bytes.Equal(seen, k) {
				return false, false
			}
		}
		keys = append(keys, k)
		if string(k) != "role" && !emptyValue(v) {
			found = true
		}
		if !saysOutput(k, v, &own) {
			return false, false
		}
	}
	if o.Malformed() {
		return false, false
	}
	sd.add(own)
	return found, true
}

// add adds o's counts to sd.
func (sd *said) add(o said) {
	sd.text.Add(o.text)
	sd.calls += o.calls
}

// saysOutput adds to sd what one delta member says: a text member's
// string, the calls of tool_calls or function_call. It reports false for
// calls it cannot read exactly (see callOutput).
func saysOutput(key, v []byte, sd *said) bool {
	switch string(key) {
	case textNames[0], textNames[1], textNames[2], textNames[3]:
		if t, ok := tokens.TextOfJSON(v); ok {
			sd.text.Add(t)
		}
	case toolCallsName:
		if len(v) == 0 || v[0] != '[' {
			return true // the decode reads no calls from it either
		}
		a := jsonscan.Elements(v)
		for c, more := a.Next(); more; c, more = a.Next() {
			if !toolCallOutput(c, sd) {
				return false
			}
		}
	case functionCallName:
		return functionOutput(v, sd)
	}
	return true
}

// toolCallOutput adds what one tool call of a delta says: its function's
// name and arguments. A call that is not an object says nothing, as its
// decode into a struct fails; ok is false for a key the decode would read
// another way (see jsonscan.Match) or twice.
func toolCallOutput(call []byte, sd *said) bool {
	if len(call) == 0 || call[0] != '{' {
		return true
	}
	var fn []byte
	o := jsonscan.Members(call)
	for k, v, more := o.Next(); more; k, v, more = o.Next() {
		i, plain := jsonscan.Match(k, toolCallNames)
		switch {
		case !plain || (i == 0 && fn != nil):
			return false
		case i == 0:
			fn = v
		}
	}
	return !o.Malformed() && (fn == nil || functionOutput(fn, sd))
}

// functionOutput adds what a called function says: its name (a call, when
// not empty) and its arguments, each counted when a string.
func functionOutput(fn []byte, sd *said) bool {
	if len(fn) == 0 || fn[0] != '{' {
		return true
	}
	var vals [2][]byte // name, arguments
	o := jsonscan.Members(fn)
	for k, v, more := o.Next(); more; k, v, more = o.Next() {
		i, plain := jsonscan.Match(k, functionNames)
		switch {
		case !plain || (i >= 0 && vals[i] != nil):
			return false
		case i >= 0:
			vals[i] = v
		}
	}
	if o.Malformed() {
		return false
	}
	for i, v := range vals {
		t, ok := tokens.TextOfJSON(v)
		if !ok {
			continue
		}
		sd.text.Add(t)
		if i == 0 && t.Bytes > 0 {
			sd.calls++
		}
	}
	return true
}

// emptyValue reports whether a value span, spaces around it trimmed, is
// null, an empty string, an empty array or an empty object, however
// spaced: a delta member that carries no output.
func emptyValue(v []byte) bool {
	switch {
	case len(v) == 0, jsonscan.IsNull(v), string(v) == `""`, jsonscan.IsEmptyArray(v):
		return true
	case v[0] != '{':
		return false
	}
	o := jsonscan.Members(v)
	_, _, more := o.Next()
	return !more && !o.Malformed()
}

// StreamsWithUsage reports whether an engine request certainly asks for a
// stream with its usage ("stream": true and stream_options.include_usage
// true, as encoding/json reads them): EngineBody's form. False means
// unsure, not no: decode the body to know.
func StreamsWithUsage(body []byte) bool {
	var stream, usage, sawStream, sawOpts bool
	o := jsonscan.Members(body)
	for key, v, more := o.Next(); more; key, v, more = o.Next() {
		i, plain := jsonscan.Match(key, streamNames)
		switch {
		case !plain:
			return false
		case i == 0:
			if sawStream {
				return false
			}
			sawStream, stream = true, string(v) == "true"
		case i == 1:
			if sawOpts {
				return false
			}
			sawOpts, usage = true, includesUsage(v)
		}
	}
	return !o.Malformed() && stream && usage
}

// includesUsage reports whether stream options certainly have
// "include_usage": true.
func includesUsage(opts []byte) bool {
	var usage, saw bool
	o := jsonscan.Members(opts)
	for key, v, more := o.Next(); more; key, v, more = o.Next() {
		i, plain := jsonscan.Match(key, includeUsageNames)
		switch {
		case !plain:
			return false
		case i < 0:
			continue
		case saw:
			return false
		}
		saw, usage = true, string(v) == "true"
	}
	return !o.Malformed() && usage
}

// FinishReason returns the first finish reason among an event's choices,
// read in place; ok is false when it is unsure (a key written with
// escapes or in another case, a duplicate, a reason that is not null or
// a plain string — one with an escape or invalid UTF-8 — an event that
// is not valid JSON), and the event must be decoded to know. Only the
// choices' finish reasons are read: an event whose other fields have
// types a decode would refuse still gives its reason.
func FinishReason(data []byte) (reason string, ok bool) {
	found, sawChoices := false, false
	o := jsonscan.Members(data)
	for key, v, more := o.Next(); more; key, v, more = o.Next() {
		i, plain := jsonscan.Match(key, choicesNames)
		switch {
		case !plain:
			return "", false
		case i < 0:
			continue
		case sawChoices:
			return "", false
		}
		sawChoices = true
		if reason, found, ok = firstReason(v); !ok {
			return "", false
		}
	}
	if o.Malformed() {
		return "", false
	}
	if !found {
		return "", true
	}
	return reason, true
}

// firstReason returns the first non-null finish_reason of choices.
func firstReason(choices []byte) (reason string, found, ok bool) {
	if jsonscan.IsNull(choices) {
		return "", false, true
	}
	a := jsonscan.Elements(choices)
	for c, more := a.Next(); more; c, more = a.Next() {
		r, saw, ok := choiceReason(c)
		if !ok {
			return "", false, false
		}
		if !saw || jsonscan.IsNull(r) || found {
			continue
		}
		lit, plain := jsonscan.Literal(r)
		if !plain {
			return "", false, false
		}
		reason, found = string(lit), true
	}
	if a.Malformed() {
		return "", false, false
	}
	return reason, found, true
}

// choiceReason returns one choice's finish_reason span; saw is false
// when it has none.
func choiceReason(choice []byte) (reason []byte, saw, ok bool) {
	o := jsonscan.Members(choice)
	for key, v, more := o.Next(); more; key, v, more = o.Next() {
		i, plain := jsonscan.Match(key, finishReasonNames)
		switch {
		case !plain:
			return nil, false, false
		case i < 0:
			continue
		case saw:
			return nil, false, false
		}
		saw, reason = true, v
	}
	if o.Malformed() {
		return nil, false, false
	}
	return reason, saw, true
}
