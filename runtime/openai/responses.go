package openai

import "encoding/json"

// ResponsesRequest is the body of POST /v1/responses as the platform
// takes it: stateless (store false, no previous_response_id), text and
// function tools. The fields it does not name are refused, not ignored
// (ResponsesFieldNames).
type ResponsesRequest struct {
	Model string `json:"model"`
	// Input is a string, or an array of input items (ResponsesInputItem).
	Input           json.RawMessage `json:"input"`
	Instructions    *string         `json:"instructions"`
	MaxOutputTokens *int64          `json:"max_output_tokens"`
	Temperature     *float64        `json:"temperature"`
	TopP            *float64        `json:"top_p"`
	Stream          bool            `json:"stream"`
	// Tools are Responses function tools ({"type":"function","name",…}).
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	// Store and PreviousResponseID are read to be refused: the platform
	// keeps no response.
	Store              *bool           `json:"store"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Metadata           json.RawMessage `json:"metadata"`
	User               string          `json:"user"`
	Truncation         string          `json:"truncation"`
	// Text is the output's format ({"format":{"type":"text"|"json_object"|
	// "json_schema",…},"verbosity"}).
	Text json.RawMessage `json:"text"`
}

// ResponsesFieldNames are the JSON names of ResponsesRequest's fields.
var ResponsesFieldNames = []string{
	"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream",
	"tools", "tool_choice", "parallel_tool_calls", "store", "previous_response_id", "metadata", "user", "truncation", "text",
}

// ResponsesInputItem is one item of a Responses input array: a message
// (type "message" or none; role and content), a function call the model
// made earlier (call_id, name, arguments) or a function call's output
// (call_id, output).
type ResponsesInputItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// ResponsesInputItemFieldNames are the JSON names of ResponsesInputItem's
// fields.
var ResponsesInputItemFieldNames = []string{"type", "id", "status", "role", "content", "call_id", "name", "arguments", "output"}

// ResponsesContentPart is one part of an input message's content:
// input_text, or output_text in an earlier assistant message.
type ResponsesContentPart struct {
	Type        string          `json:"type"`
	Text        string          `json:"text"`
	Annotations json.RawMessage `json:"annotations"`
	Logprobs    json.RawMessage `json:"logprobs"`
}

// ResponsesContentPartFieldNames are the JSON names of
// ResponsesContentPart's fields.
var ResponsesContentPartFieldNames = []string{"type", "text", "annotations", "logprobs"}

// ResponsesFunctionTool is a Responses function tool definition.
type ResponsesFunctionTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// ResponsesFunctionToolFieldNames are the JSON names of
// ResponsesFunctionTool's fields.
var ResponsesFunctionToolFieldNames = []string{"type", "name", "description", "parameters", "strict"}

// Object and status names of the Responses API.
const (
	ObjectResponse = "response"

	ResponseInProgress = "in_progress"
	ResponseCompleted  = "completed"
	ResponseIncomplete = "incomplete"
	ResponseFailed     = "failed"
)

// Response is the Responses API's response object: the non-streamed
// answer, and the body of the response.* stream events.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []ResponseItem     `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Store              bool               `json:"store"`
	Temperature        *float64           `json:"temperature"`
	TopP               *float64           `json:"top_p"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              json.RawMessage    `json:"tools"`
	Truncation         string             `json:"truncation"`
	Text               json.RawMessage    `json:"text,omitempty"`
	Metadata           json.RawMessage    `json:"metadata"`
	Usage              *ResponseUsage     `json:"usage"`
}

// ResponseError is a failed response's error.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// ResponseItem is one output item: a message with output_text content,
// or a function call.
type ResponseItem struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Status string `json:"status"`
	// A message's.
	Role    string            `json:"role,omitempty"`
	Content []ResponseContent `json:"content,omitzero"` // [] in a message, absent elsewhere
	// A function call's.
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// ResponseContent is one output_text part of a message.
type ResponseContent struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
}

// NewOutputText returns an output_text part holding text.
func NewOutputText(text string) ResponseContent {
	return ResponseContent{Type: "output_text", Text: text, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}}
}

// ResponseUsage is a response's usage in the Responses API's names.
type ResponseUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// ResponseEvent is one event of a streamed response. Type names it and
// SequenceNumber orders it; the other members are each event type's own
// (nil or zero members are left out, but output_index and content_index,
// which may be 0, are pointers).
type ResponseEvent struct {
	Type           string           `json:"type"`
	SequenceNumber int64            `json:"sequence_number"`
	Response       *Response        `json:"response,omitempty"`
	OutputIndex    *int             `json:"output_index,omitempty"`
	ContentIndex   *int             `json:"content_index,omitempty"`
	ItemID         string           `json:"item_id,omitempty"`
	Item           *ResponseItem    `json:"item,omitempty"`
	Part           *ResponseContent `json:"part,omitempty"`
	Delta          *string          `json:"delta,omitempty"`
	Text           *string          `json:"text,omitempty"`
	Arguments      *string          `json:"arguments,omitempty"`
	Logprobs       json.RawMessage  `json:"logprobs,omitempty"`
}
