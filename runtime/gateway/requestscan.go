package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"

	"github.com/llmplat/llmplat/runtime/jsonscan"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/strictjson"
)

// scanRequest decodes a chat request body in one strict pass: the keys
// are checked as strictjson.Check checks them (no duplicate, no variant
// spelling of a known field, nesting bounded by strictjson.MaxDepth) while
// the typed fields are read, and the values kept raw are proved clean by
// strictjson.Clean where they sit. It replaces, for the bodies every
// client sends, strictjson.Check followed by the request's decode (which
// validates the body, decodes it by reflection, then decodes each message
// the same way again). Anything it does not read exactly as they would —
// a key with an escape or a byte past ASCII, a duplicate or variant key, a
// value of the wrong type, an integer that is not a plain one, a string
// with an escape it does not resolve the same way, more keys in an object
// than it compares pairwise — reports false, and the two passes decide,
// refusal and all. FuzzDecodeRequest holds decodeRequest, this path
// included, to the two passes' answers.
//
// Values kept raw (a message's content, the tools) are slices of body, not
// copies: the body lives as long as the request does anyway, and a copy of
// each was as much memory again for every request being decoded. A
// messages array longer than MaxMessages is refused (scanTooMany) before
// any message is decoded; grow, when set, is asked for the memory the
// decoded messages take before they are allocated, and its error ends the
// scan (scanNoRoom).
func scanRequest(body []byte, grow func(bytes int64) error) (*openai.ChatCompletionRequest, scanVerdict) {
	req := &openai.ChatCompletionRequest{}
	var seen [len(requestFieldNames)]bool
	var unknown keyList
	o := jsonscan.Members(body)
	for k, v, more := o.Next(); more; k, v, more = o.Next() {
		i, plain := jsonscan.Match(k, requestFieldNames[:])
		switch {
		case !plain:
			return nil, scanGaveUp
		case i < 0:
			// A key the type does not name: kept as it came, and,
			// like strictjson, checked for exact duplicates.
			if !unknown.add(k) || !clean(v, 1) {
				return nil, scanGaveUp
			}
			if req.Extra == nil {
				req.Extra = map[string]json.RawMessage{}
			}
			req.Extra[string(k)] = keep(v)
			continue
		case seen[i]:
			return nil, scanGaveUp
		}
		seen[i] = true
		if i == messagesField {
			n, ok := countElements(v)
			if !ok {
				return nil, scanGaveUp
			}
			if n > MaxMessages {
				return nil, scanTooMany
			}
			if grow != nil && grow(int64(n)*messageSize) != nil {
				return nil, scanNoRoom
			}
			if !readMessages(&req.Messages, v, n) {
				return nil, scanGaveUp
			}
			continue
		}
		if !setRequestField(req, i, v) {
			return nil, scanGaveUp
		}
	}
	if o.Malformed() {
		return nil, scanGaveUp
	}
	return req, scanned
}

// scanVerdict is what scanRequest made of a body.
type scanVerdict uint8

const (
	// scanned: the body was read exactly; the request is the decode's.
	scanned scanVerdict = iota
	// scanGaveUp: the body holds something the scan does not read as the
	// two passes would; they decide.
	scanGaveUp
	// scanTooMany: the messages array is longer than MaxMessages.
	scanTooMany
	// scanNoRoom: grow found no room for the decoded messages.
	scanNoRoom
)

// messageSize is what one decoded message takes before its content, which
// stays in the body.
var messageSize = int64(reflect.TypeFor[openai.Message]().Size())

// messagesField is the index of "messages" in requestFieldNames.
const messagesField = 1

// requestFieldNames are the JSON names of ChatCompletionRequest's fields,
// in the order setRequestField reads them by index.
var requestFieldNames = [...]string{
	"model", "messages", "stream", "stream_options",
	"max_tokens", "max_completion_tokens", "n", "seed", "top_logprobs",
	"temperature", "top_p", "frequency_penalty", "presence_penalty",
	"logprobs", "parallel_tool_calls", "store",
	"user", "service_tier", "reasoning_effort", "verbosity", "prompt_cache_key", "safety_identifier",
	"stop", "tools", "tool_choice", "functions", "function_call", "response_format", "logit_bias",
	"metadata", "modalities", "audio", "prediction", "web_search_options",
}

// setRequestField reads the value of requestFieldNames[i] into req.
func setRequestField(req *openai.ChatCompletionRequest, i int, v []byte) bool {
	switch name := requestFieldNames[i]; name {
	case "model":
		return readString(&req.Model, v)
	case "stream":
		return readBool(&req.Stream, v)
	case "stream_options":
		return readStreamOptions(&req.StreamOptions, v)
	case "max_tokens":
		return readInt(&req.MaxTokens, v)
	case "max_completion_tokens":
		return readInt(&req.MaxCompletionTokens, v)
	case "n":
		return readInt(&req.N, v)
	case "seed":
		return readInt(&req.Seed, v)
	case "top_logprobs":
		return readInt(&req.TopLogprobs, v)
	case "temperature":
		return readFloat(&req.Temperature, v)
	case "top_p":
		return readFloat(&req.TopP, v)
	case "frequency_penalty":
		return readFloat(&req.FrequencyPenalty, v)
	case "presence_penalty":
		return readFloat(&req.PresencePenalty, v)
	case "logprobs":
		return readBoolPtr(&req.Logprobs, v)
	case "parallel_tool_calls":
		return readBoolPtr(&req.ParallelToolCall, v)
	case "store":
		return readBoolPtr(&req.Store, v)
	case "user":
		return readString(&req.User, v)
	case "service_tier":
		return readString(&req.ServiceTier, v)
	case "reasoning_effort":
		return readString(&req.ReasoningEffort, v)
	case "verbosity":
		return readString(&req.Verbosity, v)
	case "prompt_cache_key":
		return readString(&req.PromptCacheKey, v)
	case "safety_identifier":
		return readString(&req.SafetyIdentifier, v)
	}
	raw := [...]*json.RawMessage{&req.Stop, &req.Tools, &req.ToolChoice, &req.Functions, &req.FunctionCall,
		&req.ResponseFormat, &req.LogitBias, &req.Metadata, &req.Modalities, &req.Audio, &req.Prediction,
		&req.WebSearchOptions}
	return readRaw(raw[i-rawFieldsFrom], v, 1)
}

// rawFieldsFrom is the index in requestFieldNames of "stop", the first of
// the fields kept raw.
const rawFieldsFrom = 22

// messageFieldNames are the JSON names of Message's fields.
var messageFieldNames = [...]string{"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "audio"}

// countElements counts the elements of an array (0 for null), without
// decoding them; ok is false for any other value.
func countElements(v []byte) (n int, ok bool) {
	if jsonscan.IsNull(v) {
		return 0, true
	}
	if v[0] != '[' {
		return 0, false
	}
	for a := jsonscan.Elements(v); ; n++ {
		if _, more := a.Next(); !more {
			break
		}
	}
	return n, true
}

// readMessages reads the messages array of n elements (countElements);
// each message is an object (or null, which decodes to an empty message).
// The slice is allocated once and no larger than it needs: a message is
// some 150 bytes before its content.
func readMessages(dst *[]openai.Message, v []byte, n int) bool {
	if jsonscan.IsNull(v) {
		*dst = nil
		return true
	}
	a := jsonscan.Elements(v)
	msgs := make([]openai.Message, 0, n)
	for m, more := a.Next(); more; m, more = a.Next() {
		msgs = append(msgs, openai.Message{})
		if jsonscan.IsNull(m) {
			continue
		}
		if !readMessage(&msgs[len(msgs)-1], m) {
			return false
		}
	}
	if a.Malformed() {
		return false
	}
	*dst = msgs
	return true
}

// readMessage reads one message object, three levels deep (the body, the
// messages array, the message).
func readMessage(m *openai.Message, v []byte) bool {
	const depth = 3
	var seen [len(messageFieldNames)]bool
	var unknown keyList
	o := jsonscan.Members(v)
	for k, v, more := o.Next(); more; k, v, more = o.Next() {
		i, plain := jsonscan.Match(k, messageFieldNames[:])
		switch {
		case !plain:
			return false
		case i < 0:
			if !unknown.add(k) || !clean(v, depth) {
				return false
			}
			if m.Extra == nil {
				m.Extra = map[string]json.RawMessage{}
			}
			m.Extra[string(k)] = keep(v)
			continue
		case seen[i]:
			return false
		}
		seen[i] = true
		var ok bool
		switch i {
		case 0:
			ok = readRole(&m.Role, v)
		case 1:
			ok = readRaw(&m.Content, v, depth)
		case 2:
			ok = readString(&m.Name, v)
		case 3:
			ok = readRaw(&m.ToolCalls, v, depth)
		case 4:
			ok = readString(&m.ToolCallID, v)
		case 5:
			ok = readRaw(&m.Refusal, v, depth)
		case 6:
			ok = readRaw(&m.Audio, v, depth)
		}
		if !ok {
			return false
		}
	}
	return !o.Malformed()
}

// streamOptionsType is the type strictjson checks stream_options' members
// against.
var streamOptionsType = reflect.TypeFor[openai.StreamOptions]()

// streamOptionNames are the JSON names of StreamOptions' fields.
var streamOptionNames = []string{"include_usage", "continuous_usage_stats"}

// readStreamOptions reads stream_options, two levels deep.
func readStreamOptions(dst **openai.StreamOptions, v []byte) bool {
	if jsonscan.IsNull(v) {
		*dst = nil
		return true
	}
	if v[0] != '{' || !strictjson.Clean(v, streamOptionsType, 1) {
		return false
	}
	opts := &openai.StreamOptions{}
	var seen [2]bool
	o := jsonscan.Members(v)
	for k, v, more := o.Next(); more; k, v, more = o.Next() {
		i, plain := jsonscan.Match(k, streamOptionNames)
		switch {
		case !plain || i >= 0 && seen[i]:
			return false
		case i == 0:
			if !readBool(&opts.IncludeUsage, v) {
				return false
			}
		case i == 1:
			if !readBoolPtr(&opts.ContinuousUsageStats, v) {
				return false
			}
		}
		if i >= 0 {
			seen[i] = true
		}
	}
	*dst = opts
	return !o.Malformed()
}

// readString reads a string field: null leaves it as it is, as
// encoding/json does; a string with an escape or invalid UTF-8 is decoded
// by encoding/json itself.
func readString(dst *string, v []byte) bool {
	if jsonscan.IsNull(v) {
		return true
	}
	if lit, ok := jsonscan.Literal(v); ok {
		*dst = string(lit)
		return true
	}
	return v[0] == '"' && json.Unmarshal(v, dst) == nil
}

// readBool reads a bool field; null leaves it as it is.
func readBool(dst *bool, v []byte) bool {
	switch string(v) {
	case "null":
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return false
	}
	return true
}

// readBoolPtr reads an optional bool; null clears it.
func readBoolPtr(dst **bool, v []byte) bool {
	if jsonscan.IsNull(v) {
		*dst = nil
		return true
	}
	var b bool
	if !readBool(&b, v) {
		return false
	}
	*dst = &b
	return true
}

// readInt reads an optional integer: a plain integer in range, as
// encoding/json reads one into an int64; null clears it.
func readInt(dst **int64, v []byte) bool {
	if jsonscan.IsNull(v) {
		*dst = nil
		return true
	}
	n, ok := jsonscan.Int(v)
	if !ok {
		return false
	}
	*dst = &n
	return true
}

// readFloat reads an optional number as encoding/json does (ParseFloat of
// the number as written); null clears it.
func readFloat(dst **float64, v []byte) bool {
	if jsonscan.IsNull(v) {
		*dst = nil
		return true
	}
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return false
	}
	*dst = &f
	return true
}

// readRaw keeps a value as it came (null too: a json.RawMessage holds
// it), once strictjson.Clean has proved it, at depth, free of duplicate
// keys and of nesting past the bound.
func readRaw(dst *json.RawMessage, v []byte, depth int) bool {
	if !clean(v, depth) {
		return false
	}
	*dst = keep(v)
	return true
}

// keep is a raw value as the request holds it: the body's own bytes, with
// the capacity cut so that nothing appended to it could write into the
// body.
func keep(v []byte) json.RawMessage { return v[:len(v):len(v)] }

// readRole reads a message's role: the roles the API defines are the
// constants themselves, so that a request of many messages does not hold
// a copy of its role in each.
func readRole(dst *string, v []byte) bool {
	lit, ok := jsonscan.Literal(v)
	if !ok {
		return readString(dst, v)
	}
	switch string(lit) {
	case "user":
		*dst = "user"
	case "assistant":
		*dst = "assistant"
	case "system":
		*dst = "system"
	case "tool":
		*dst = "tool"
	case "developer":
		*dst = "developer"
	default:
		*dst = string(lit)
	}
	return true
}

// clean is strictjson.Clean for a free-form value that jsonscan has
// checked well-formed: only an object or an array can hold a key or
// nest, so a scalar, the common case (a message's text), is not read
// again.
func clean(v []byte, depth int) bool {
	return v[0] != '{' && v[0] != '[' || strictjson.Clean(v, nil, depth)
}

// maxScannedKeys is how many keys of one object the scan compares
// pairwise; an object with more unknown keys goes to strictjson, which
// keeps them in a map.
const maxScannedKeys = 16

// keyList holds the unknown keys of one object, for the duplicate check.
type keyList struct {
	keys [maxScannedKeys][]byte
	n    int
}

// add records key and reports whether it was new and there was room.
func (l *keyList) add(key []byte) bool {
	for _, k := range l.keys[:l.n] {
		if bytes.Equal(k, key) {
			return false
		}
	}
	if l.n == len(l.keys) {
		return false
	}
	l.keys[l.n] = key
	l.n++
	return true
}
