package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/strictjson"
)

// Bounds of a request body's decode, each with its reason.
const (
	// MaxMessages bounds a request's messages. Every message costs at
	// least tokens.MessageOverhead (5) prompt tokens of its chat template,
	// so 65,536 messages fill 327,680 tokens before any text: past the
	// context of every model the platform serves, which the ledger would
	// refuse anyway. The decode refuses them before it allocates the 150
	// bytes each message takes decoded: a body of one-word messages would
	// otherwise cost five times its size.
	MaxMessages = 1 << 16
	// MaxSlowBodyBytes bounds the bodies the exact two-pass decode
	// (strictjson.Check, then encoding/json) takes: it allocates up to
	// 60 bytes per byte of a body dense with escaped keys, where the scan
	// allocates at most two. Every SDK writes its keys plainly, so only a
	// hand-made body is refused for it; 1 MiB holds a long conversation
	// with tool schemas whose keys are escaped (Python's json.dumps escapes
	// every byte past ASCII by default).
	MaxSlowBodyBytes = 1 << 20
	// slowBodyWeight is what a byte of body costs the budget in the exact
	// decode: what it allocates at most per byte
	// (TestDecodeMemoryIsBounded).
	slowBodyWeight = 64
)

// decodeRequest decodes and validates a chat request body; a refusal is
// the 400's body.
//
// The scan (scanRequest) reads what every SDK sends; a body it gives up on
// goes through the two exact passes (decodeChecked), which cost tens of
// bytes per byte of body, so they take a body of at most MaxSlowBodyBytes.
func decodeRequest(body []byte) (*openai.ChatCompletionRequest, *openai.ErrorBody) {
	req, refusal, _ := decodeBody(body, nil)
	return req, refusal
}

// decodeBody is decodeRequest that asks for the memory it is about to
// allocate beyond twice the body: grow, when set, is called with the bytes
// the decoded messages take (before they are allocated) and with
// slowBodyWeight bytes per byte of body before the exact decode, and its
// error (no room in the budget) is returned as it is.
func decodeBody(body []byte, grow func(bytes int64) error) (*openai.ChatCompletionRequest, *openai.ErrorBody, error) {
	req, verdict := scanRequest(body, grow)
	switch verdict {
	case scanNoRoom:
		return nil, nil, errBodyBudget
	case scanTooMany:
		return nil, tooManyMessages(), nil
	case scanGaveUp:
		if len(body) > MaxSlowBodyBytes {
			return nil, openai.NewError(openai.TypeInvalidRequest, "body_not_plain", "", fmt.Sprintf(
				"a request body over %d bytes must write its keys plainly (no escapes, no bytes past ASCII in the API's own keys, "+
					"at most %d keys the API does not define in one object, plain integers): this one needs the exact decode, "+
					"which takes smaller bodies only", MaxSlowBodyBytes, maxScannedKeys)), nil
		}
		if grow != nil {
			if err := grow(slowBodyWeight * int64(len(body))); err != nil {
				return nil, nil, err
			}
		}
		var refusal *openai.ErrorBody
		if req, refusal = decodeChecked(body); refusal != nil {
			return nil, refusal, nil
		}
		if len(req.Messages) > MaxMessages {
			return nil, tooManyMessages(), nil
		}
	}
	if e := checkDecoded(req, nil); e != nil {
		return nil, e, nil
	}
	return req, nil, nil
}

// checkDecoded refuses a decoded chat request, whatever endpoint it came
// from, for what it forwards unread (extraBytes) or for a value no engine
// takes (Validate); param names the refused field as the client wrote it
// (nil: as the chat completion names it).
func checkDecoded(req *openai.ChatCompletionRequest, param func(string) string) *openai.ErrorBody {
	if name, n := extraBytes(req); n > MaxExtraBytes {
		return openai.NewError(openai.TypeInvalidRequest, "unknown_fields_too_large", name,
			fmt.Sprintf("fields the API does not define take %d bytes; at most %d are forwarded", n, MaxExtraBytes))
	}
	if err := req.Validate(); err != nil {
		var fe *openai.FieldError
		name := ""
		if errors.As(err, &fe) {
			name = fe.Param
		}
		if param != nil {
			name = param(name)
		}
		return openai.NewError(openai.TypeInvalidRequest, "invalid_value", name, err.Error())
	}
	return nil
}

// decodeChecked decodes a body scanRequest leaves: strictjson.Check, then
// the request's own decode; a refusal is the 400's body.
func decodeChecked(body []byte) (*openai.ChatCompletionRequest, *openai.ErrorBody) {
	// Keys are read exactly, as the engine reads them: a duplicate or a
	// variant spelling of a known key ("max_to\u212aens") would let
	// encoding/json and the engine disagree about what was asked.
	// Check is the first pass over the body, and bounds the depth of
	// every later one: the decode, the URL guard's walk.
	if err := strictjson.Check(body, requestType); err != nil {
		var se *strictjson.Error
		if errors.Is(err, strictjson.ErrTooDeep) {
			return nil, tooDeep()
		}
		if errors.As(err, &se) {
			code := "variant_key"
			if se.Duplicate {
				code = "duplicate_key"
			}
			return nil, openai.NewError(openai.TypeInvalidRequest, code, se.Path, se.Msg)
		}
		return nil, bodyRefusal(body, err)
	}
	// The body is well-formed JSON (Check said so): the decode is called
	// directly, without json.Unmarshal's validation of the whole body
	// before it calls the decode, which validates it again.
	var req openai.ChatCompletionRequest
	if err := req.UnmarshalJSON(body); err != nil {
		return nil, bodyRefusal(body, err)
	}
	return &req, nil
}

// tooManyMessages is the 400 of a body with more than MaxMessages
// messages.
func tooManyMessages() *openai.ErrorBody {
	return openai.NewError(openai.TypeInvalidRequest, "too_many_messages", "messages", fmt.Sprintf(
		"a request may hold at most %d messages", MaxMessages))
}

// tooDeep is the 400 of a body nested past strictjson.MaxDepth.
func tooDeep() *openai.ErrorBody {
	return openai.NewError(openai.TypeInvalidRequest, "nesting_too_deep", "", fmt.Sprintf(
		"the request body nests objects and arrays deeper than %d levels", strictjson.MaxDepth))
}

// bodyRefusal is the 400 for a body that is not JSON, or whose field has
// the wrong type: it names the field (a message by its index, as
// duplicate_key does) and the types in the API's terms, not the decoder's.
func bodyRefusal(body []byte, err error) *openai.ErrorBody {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		field := te.Field
		inMessage := field == "messages" || strings.HasPrefix(field, "messages.")
		if inMessage && (te.Type == nil || te.Type.Kind() != reflect.Slice) {
			if i, ok := badMessage(body); ok {
				field = "messages[" + strconv.Itoa(i) + "]" + strings.TrimPrefix(field, "messages")
			}
		}
		return openai.NewError(openai.TypeInvalidRequest, "invalid_type", field,
			fmt.Sprintf("invalid type for %q: expected %s, got %s", field, jsonKind(te.Type), te.Value))
	}
	msg := strings.TrimPrefix(err.Error(), strictjson.ErrInvalid.Error()+": ")
	return openai.NewError(openai.TypeInvalidRequest, "invalid_json", "", "the request body is not valid JSON: "+msg)
}

// badMessage returns the index of the first message of body that does not
// decode: the decoder's type error names the field, not the message.
func badMessage(body []byte) (int, bool) {
	var top struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &top) != nil {
		return 0, false
	}
	for i, raw := range top.Messages {
		var m openai.Message
		if json.Unmarshal(raw, &m) != nil {
			return i, true
		}
	}
	return 0, false
}

// jsonKind names what JSON value a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another type"
}

// requestType is what a chat request body decodes into.
var requestType = reflect.TypeFor[openai.ChatCompletionRequest]()

// MaxExtraBytes bounds the fields of a request the API does not define
// (vLLM's own sampling options travel this way), summed over the request
// and its messages: enough for a guided-decoding schema, and far from the
// megabytes that would be held for a stream's whole life.
const MaxExtraBytes = 256 << 10

// extraBytes sums the raw size of the request's undefined fields and names
// the largest.
func extraBytes(req *openai.ChatCompletionRequest) (largest string, total int) {
	most := -1
	add := func(prefix func() string, extra map[string]json.RawMessage) {
		for k, v := range extra {
			total += len(k) + len(v)
			if len(v) > most {
				most, largest = len(v), prefix()+k
			}
		}
	}
	add(func() string { return "" }, req.Extra)
	for i := range req.Messages {
		// The prefix is built only for a message that has extra fields.
		add(func() string { return fmt.Sprintf("messages[%d].", i) }, req.Messages[i].Extra)
	}
	return largest, total
}
