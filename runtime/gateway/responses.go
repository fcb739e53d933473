package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/strictjson"
)

// responses serves POST /v1/responses, stateless: the body is decoded
// (decodeResponses) and translated to a chat completion, which runs
// through the same exchange as POST /v1/chat/completions — the same
// admission, limits, reservation, dispatch and settle — and is relayed as
// Responses events or one response object (responses_relay.go). Engines
// are reached through their chat completions: every engine the platform
// serves, the simulator included, has them.
func (s *Server) responses(c *gin.Context) {
	x := &exchange{s: s, c: c, start: s.cfg.Clock.Now(), api: &responsesAPI{}}
	defer x.close()
	if x.open() {
		x.run()
	}
}

// responsesAPI is what a Responses exchange shows its client besides the
// answer: the fields the response object echoes, read at decode, and the
// stream's running state.
type responsesAPI struct {
	instructions      *string
	maxOutputTokens   *int64
	temperature, topP *float64
	parallelToolCalls bool
	// toolChoice, tools and metadata are copies: the body is not kept for
	// the stream's life.
	toolChoice, tools, metadata, text json.RawMessage
	truncation                        string

	ident responseIdentity
	seq   int64 // the next event's sequence number
	// opened: the message item and its text part were announced.
	opened bool
	sent   int    // the bytes of the answer's text sent as deltas
	ans    answer // the answer so far, assembled from the engine's chunks
}

// decode is the exchange's body decoder for a Responses body.
func (api *responsesAPI) decode(body []byte, grow func(bytes int64) error) (*openai.ChatCompletionRequest, *openai.ErrorBody, error) {
	// A Responses body takes the exact decode only (strictjson.Check, then
	// encoding/json), whose memory is bounded per byte of body.
	if len(body) > MaxSlowBodyBytes {
		return nil, openai.NewError(openai.TypeInvalidRequest, "request_too_large", "", fmt.Sprintf(
			"a Responses request body may hold at most %d bytes", MaxSlowBodyBytes)), nil
	}
	if grow != nil {
		if err := grow(slowBodyWeight * int64(len(body))); err != nil {
			return nil, nil, err
		}
	}
	var r openai.ResponsesRequest
	if e := strictDecode(body, &r, openai.ResponsesFieldNames, ""); e != nil {
		return nil, e, nil
	}
	req, e := api.translate(&r)
	if e != nil {
		return nil, e, nil
	}
	if len(req.Messages) > MaxMessages {
		return nil, tooManyMessages(), nil
	}
	if e := checkDecoded(req, responsesParam); e != nil {
		return nil, e, nil
	}
	return req, nil, nil
}

// responsesParam names a chat request's field as the Responses body named
// it.
func responsesParam(chat string) string {
	if chat == "max_tokens" {
		return "max_output_tokens"
	}
	return chat
}

// strictDecode decodes one JSON object into v, a pointer to a struct
// whose JSON names are names: a duplicate or variant key is refused as the
// chat body's are (strictjson.Check), and a key not in names is refused as
// an unsupported parameter, not ignored. path prefixes the param named.
func strictDecode(data []byte, v any, names []string, path string) *openai.ErrorBody {
	if err := strictjson.Check(data, reflect.TypeOf(v).Elem()); err != nil {
		var se *strictjson.Error
		switch {
		case errors.Is(err, strictjson.ErrTooDeep):
			return tooDeep()
		case errors.As(err, &se):
			code := "variant_key"
			if se.Duplicate {
				code = "duplicate_key"
			}
			return openai.NewError(openai.TypeInvalidRequest, code, joinPath(path, se.Path), se.Msg)
		}
		return bodyRefusal(data, err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return invalidType(path, "an object")
	}
	for k := range keys {
		if !slices.Contains(names, k) {
			return unsupported(joinPath(path, k), "the parameter "+strconv.Quote(k)+" is not supported by this platform's /v1/responses")
		}
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return invalidType(joinPath(path, te.Field), jsonKind(te.Type))
		}
		return bodyRefusal(data, err)
	}
	return nil
}

func joinPath(path, field string) string {
	switch {
	case path == "":
		return field
	case field == "":
		return path
	}
	return path + "." + field
}

func unsupported(param, msg string) *openai.ErrorBody {
	return openai.NewError(openai.TypeInvalidRequest, "unsupported_parameter", param, msg)
}

func invalidType(param, want string) *openai.ErrorBody {
	return openai.NewError(openai.TypeInvalidRequest, "invalid_type", param, fmt.Sprintf("invalid type for %q: expected %s", param, want))
}

func isNullOrEmpty(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || bytes.Equal(v, []byte("null"))
}

// translate turns a Responses request into the chat completion the
// engine runs, keeping what the response object echoes.
func (api *responsesAPI) translate(r *openai.ResponsesRequest) (*openai.ChatCompletionRequest, *openai.ErrorBody) {
	if r.Store != nil && *r.Store {
		return nil, unsupported("store", "this platform keeps no responses: send store false or leave it out")
	}
	if r.PreviousResponseID != nil {
		return nil, unsupported("previous_response_id",
			"this platform keeps no responses, so none can be continued: send the conversation so far as input items")
	}
	if r.Truncation != "" && r.Truncation != "disabled" {
		return nil, unsupported("truncation", `only truncation "disabled" is supported`)
	}
	if !isNullOrEmpty(r.Metadata) && r.Metadata[0] != '{' {
		return nil, invalidType("metadata", "an object")
	}
	req := &openai.ChatCompletionRequest{Model: r.Model, Stream: r.Stream, Temperature: r.Temperature, TopP: r.TopP,
		ParallelToolCall: r.ParallelToolCalls, User: r.User, MaxCompletionTokens: r.MaxOutputTokens}
	if r.Instructions != nil && *r.Instructions != "" {
		req.Messages = append(req.Messages, openai.TextMessage("system", *r.Instructions))
	}
	msgs, e := inputMessages(r.Input)
	if e != nil {
		return nil, e
	}
	req.Messages = append(req.Messages, msgs...)
	if !isNullOrEmpty(r.Tools) {
		tools, e := chatTools(r.Tools)
		if e != nil {
			return nil, e
		}
		req.Tools = tools
	}
	if !isNullOrEmpty(r.Text) {
		rf, verbosity, e := chatResponseFormat(r.Text)
		if e != nil {
			return nil, e
		}
		req.ResponseFormat, req.Verbosity = rf, verbosity
	}
	if !isNullOrEmpty(r.ToolChoice) {
		tc, e := chatToolChoice(r.ToolChoice)
		if e != nil {
			return nil, e
		}
		req.ToolChoice = tc
	}
	api.instructions, api.maxOutputTokens, api.temperature, api.topP = r.Instructions, r.MaxOutputTokens, r.Temperature, r.TopP
	api.parallelToolCalls = r.ParallelToolCalls == nil || *r.ParallelToolCalls
	api.tools, api.toolChoice, api.metadata = json.RawMessage(`[]`), json.RawMessage(`"auto"`), json.RawMessage(`{}`)
	if !isNullOrEmpty(r.Tools) {
		api.tools = bytes.Clone(r.Tools)
	}
	if !isNullOrEmpty(r.ToolChoice) {
		api.toolChoice = bytes.Clone(r.ToolChoice)
	}
	if !isNullOrEmpty(r.Metadata) {
		api.metadata = bytes.Clone(r.Metadata)
	}
	api.text = json.RawMessage(`{"format":{"type":"text"}}`)
	if !isNullOrEmpty(r.Text) {
		api.text = bytes.Clone(r.Text)
	}
	api.truncation = "disabled"
	return req, nil
}

// inputMessages turns input — a string (one user message) or an array of
// items — into chat messages. Consecutive function calls become one
// assistant message with their tool calls; a function call's output
// becomes a tool message.
func inputMessages(input json.RawMessage) ([]openai.Message, *openai.ErrorBody) {
	if isNullOrEmpty(input) {
		return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_value", "input", "input is required")
	}
	if input[0] == '"' {
		return []openai.Message{{Role: "user", Content: input}}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(input, &items); err != nil {
		return nil, invalidType("input", "a string or an array of input items")
	}
	if len(items) > MaxMessages {
		return nil, tooManyMessages()
	}
	msgs := make([]openai.Message, 0, len(items))
	var calls []toolCall // the function calls of the assistant message being built
	flush := func() {
		if len(calls) > 0 {
			b, _ := json.Marshal(calls) // strings and a struct: always encodes
			msgs = append(msgs, openai.Message{Role: "assistant", ToolCalls: b})
			calls = nil
		}
	}
	for i, raw := range items {
		path := "input[" + strconv.Itoa(i) + "]"
		var it openai.ResponsesInputItem
		if e := strictDecode(raw, &it, openai.ResponsesInputItemFieldNames, path); e != nil {
			return nil, e
		}
		switch it.Type {
		case "", "message":
			flush()
			m, e := inputMessage(&it, path)
			if e != nil {
				return nil, e
			}
			msgs = append(msgs, m)
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_value", path, "a function_call item needs call_id and name")
			}
			var c toolCall
			c.ID, c.Type, c.Function.Name, c.Function.Arguments = it.CallID, "function", it.Name, it.Arguments
			calls = append(calls, c)
		case "function_call_output":
			flush()
			if it.CallID == "" || len(it.Output) == 0 || it.Output[0] != '"' {
				return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_value", path,
					"a function_call_output item needs call_id and output (a string)")
			}
			msgs = append(msgs, openai.Message{Role: "tool", ToolCallID: it.CallID, Content: it.Output})
		default:
			return nil, unsupported(path+".type", "input items of type "+strconv.Quote(it.Type)+" are not supported")
		}
	}
	flush()
	return msgs, nil
}

// inputMessage turns a message item into a chat message: its content a
// string, or input_text (output_text for an assistant's) parts, which
// become text parts.
func inputMessage(it *openai.ResponsesInputItem, path string) (openai.Message, *openai.ErrorBody) {
	switch it.Role {
	case "user", "system", "developer", "assistant":
	default:
		return openai.Message{}, openai.NewError(openai.TypeInvalidRequest, "invalid_value", path+".role",
			fmt.Sprintf("unknown role %q", it.Role))
	}
	if len(it.Content) == 0 || it.Content[0] == '"' {
		if len(it.Content) == 0 {
			return openai.Message{}, openai.NewError(openai.TypeInvalidRequest, "invalid_value", path+".content", "a message needs content")
		}
		return openai.Message{Role: it.Role, Content: it.Content}, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(it.Content, &parts); err != nil {
		return openai.Message{}, invalidType(path+".content", "a string or an array of content parts")
	}
	type textPart struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	out := make([]textPart, 0, len(parts))
	for j, raw := range parts {
		pp := path + ".content[" + strconv.Itoa(j) + "]"
		var p openai.ResponsesContentPart
		if e := strictDecode(raw, &p, openai.ResponsesContentPartFieldNames, pp); e != nil {
			return openai.Message{}, e
		}
		switch p.Type {
		case "input_text", "output_text":
		default:
			return openai.Message{}, unsupported(pp+".type", "content parts of type "+strconv.Quote(p.Type)+" are not supported")
		}
		out = append(out, textPart{Type: "text", Text: p.Text})
	}
	b, _ := json.Marshal(out) // strings: always encodes
	return openai.Message{Role: it.Role, Content: b}, nil
}

// chatTools turns Responses function tools into chat tools.
func chatTools(raw json.RawMessage) (json.RawMessage, *openai.ErrorBody) {
	var tools []json.RawMessage
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, invalidType("tools", "an array of tools")
	}
	type function struct {
		Name        string          `json:"name"`
		Description *string         `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	}
	type chatTool struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	out := make([]chatTool, 0, len(tools))
	for i, t := range tools {
		path := "tools[" + strconv.Itoa(i) + "]"
		var ft openai.ResponsesFunctionTool
		if e := strictDecode(t, &ft, openai.ResponsesFunctionToolFieldNames, path); e != nil {
			return nil, e
		}
		if ft.Type != "function" {
			return nil, unsupported(path+".type", "only function tools are supported, not "+strconv.Quote(ft.Type))
		}
		if ft.Name == "" {
			return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_value", path+".name", "a function tool needs a name")
		}
		params := ft.Parameters
		if isNullOrEmpty(params) {
			params = nil
		}
		out = append(out, chatTool{Type: "function", Function: function{Name: ft.Name, Description: ft.Description, Parameters: params, Strict: ft.Strict}})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, invalidType("tools", "an array of function tools")
	}
	return b, nil
}

// chatToolChoice turns a Responses tool_choice ("auto", "none",
// "required", or {"type":"function","name":…}) into the chat one.
func chatToolChoice(raw json.RawMessage) (json.RawMessage, *openai.ErrorBody) {
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "auto", "none", "required":
			return raw, nil
		}
		return nil, openai.NewError(openai.TypeInvalidRequest, "invalid_value", "tool_choice", fmt.Sprintf("unknown tool_choice %q", mode))
	}
	var fn struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if e := strictDecode(raw, &fn, []string{"type", "name"}, "tool_choice"); e != nil {
		return nil, e
	}
	if fn.Type != "function" || fn.Name == "" {
		return nil, unsupported("tool_choice", "tool_choice names a function tool only: {\"type\":\"function\",\"name\":…}")
	}
	var chat struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	chat.Type, chat.Function.Name = "function", fn.Name
	b, _ := json.Marshal(chat) // strings: always encodes
	return b, nil
}

// chatResponseFormat turns a Responses text config into the chat
// response_format (nil for plain text) and verbosity.
func chatResponseFormat(raw json.RawMessage) (json.RawMessage, string, *openai.ErrorBody) {
	var text struct {
		Format    json.RawMessage `json:"format"`
		Verbosity string          `json:"verbosity"`
	}
	if e := strictDecode(raw, &text, []string{"format", "verbosity"}, "text"); e != nil {
		return nil, "", e
	}
	if isNullOrEmpty(text.Format) {
		return nil, text.Verbosity, nil
	}
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description *string         `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if e := strictDecode(text.Format, &f, []string{"type", "name", "description", "schema", "strict"}, "text.format"); e != nil {
		return nil, "", e
	}
	switch f.Type {
	case "text":
		return nil, text.Verbosity, nil
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), text.Verbosity, nil
	case "json_schema":
	default:
		return nil, "", unsupported("text.format.type", "output formats are text, json_object and json_schema, not "+strconv.Quote(f.Type))
	}
	if f.Name == "" || isNullOrEmpty(f.Schema) {
		return nil, "", openai.NewError(openai.TypeInvalidRequest, "invalid_value", "text.format", "a json_schema format needs name and schema")
	}
	type jsonSchema struct {
		Name        string          `json:"name"`
		Description *string         `json:"description,omitempty"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict,omitempty"`
	}
	b, err := json.Marshal(struct {
		Type       string     `json:"type"`
		JSONSchema jsonSchema `json:"json_schema"`
	}{"json_schema", jsonSchema{f.Name, f.Description, f.Schema, f.Strict}})
	if err != nil {
		return nil, "", invalidType("text.format.schema", "an object")
	}
	return b, text.Verbosity, nil
}
