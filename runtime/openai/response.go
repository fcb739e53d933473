package openai

import "encoding/json"

// Finish reasons an engine reports.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
	FinishAbort     = "abort"
)

// Object names of responses and chunks.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
)

// Usage counts the tokens of one request. The field order is vLLM's
// (prompt, total, completion) so that encoded chunks match it byte for byte.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// NewUsage returns the usage of a request with the given counts.
func NewUsage(prompt, completion int64) *Usage {
	return &Usage{PromptTokens: prompt, TotalTokens: prompt + completion, CompletionTokens: completion}
}

// ChatCompletionChunk is one event of a streamed completion.
type ChatCompletionChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	// Usage is set only on the final usage chunk (whose Choices is empty).
	// Some engines send "usage":null on every chunk; that decodes to nil.
	Usage *Usage `json:"usage,omitempty"`
}

// ChunkChoice is one choice of a stream chunk.
type ChunkChoice struct {
	Index        int             `json:"index"`
	Delta        Delta           `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	// StopReason is vLLM's: present (usually null) on the finishing chunk.
	StopReason json.RawMessage `json:"stop_reason,omitempty"`
}

// Delta is the new part of a message in a stream chunk.
type Delta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls json.RawMessage `json:"tool_calls,omitempty"`
}

// ChatCompletion is the body of a non-streamed completion.
type ChatCompletion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage"`
}

// Choice is one choice of a non-streamed completion.
type Choice struct {
	Index        int             `json:"index"`
	Message      ResponseMessage `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason,omitempty"`
}

// ResponseMessage is the assistant message of a non-streamed completion.
type ResponseMessage struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	// ReasoningContent is vLLM's reasoning parser's output, when on.
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        json.RawMessage `json:"tool_calls,omitempty"`
}

// Model is one entry of GET /v1/models.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is vLLM's: the longest context the engine accepts.
	MaxModelLen int64 `json:"max_model_len,omitempty"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// null is the JSON null used for fields vLLM always sends as null.
var null = json.RawMessage("null")

// Null returns a JSON null, for fields such as logprobs that engines send as
// an explicit null.
func Null() json.RawMessage { return null }

// String returns a pointer to s, for optional string fields.
func String(s string) *string { return &s }
