package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// ChatCompletionRequest is the body of POST /v1/chat/completions. Every field
// OpenAI documents has a typed home; fields that the platform only forwards
// stay raw JSON, and fields nobody documents are kept in Extra so that a
// forwarded body loses nothing (vLLM's own sampling extensions such as
// top_k or ignore_eos travel this way).
type ChatCompletionRequest struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`

	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`

	MaxTokens           *int64 `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64 `json:"max_completion_tokens,omitempty"`
	N                   *int64 `json:"n,omitempty"`
	Seed                *int64 `json:"seed,omitempty"`

	Temperature      *float64 `json:"temperature,omitempty"`
	TopP             *float64 `json:"top_p,omitempty"`
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	Logprobs         *bool    `json:"logprobs,omitempty"`
	TopLogprobs      *int64   `json:"top_logprobs,omitempty"`
	ParallelToolCall *bool    `json:"parallel_tool_calls,omitempty"`
	Store            *bool    `json:"store,omitempty"`

	User             string `json:"user,omitempty"`
	ServiceTier      string `json:"service_tier,omitempty"`
	ReasoningEffort  string `json:"reasoning_effort,omitempty"`
	Verbosity        string `json:"verbosity,omitempty"`
	PromptCacheKey   string `json:"prompt_cache_key,omitempty"`
	SafetyIdentifier string `json:"safety_identifier,omitempty"`

	// Stop is a string or an array of up to four strings.
	Stop json.RawMessage `json:"stop,omitempty"`

	Tools            json.RawMessage `json:"tools,omitempty"`
	ToolChoice       json.RawMessage `json:"tool_choice,omitempty"`
	Functions        json.RawMessage `json:"functions,omitempty"`
	FunctionCall     json.RawMessage `json:"function_call,omitempty"`
	ResponseFormat   json.RawMessage `json:"response_format,omitempty"`
	LogitBias        json.RawMessage `json:"logit_bias,omitempty"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
	Modalities       json.RawMessage `json:"modalities,omitempty"`
	Audio            json.RawMessage `json:"audio,omitempty"`
	Prediction       json.RawMessage `json:"prediction,omitempty"`
	WebSearchOptions json.RawMessage `json:"web_search_options,omitempty"`

	// Extra holds every top-level field the type above does not name,
	// exactly as it arrived.
	Extra map[string]json.RawMessage `json:"-"`
}

// StreamOptions are the options of a streamed request.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
	// ContinuousUsageStats is vLLM's extension: usage on every chunk.
	ContinuousUsageStats *bool `json:"continuous_usage_stats,omitempty"`
}

// Message is one chat message. Content is a string or an array of parts
// (text, image_url, input_audio, file); it stays raw so a forwarded message
// is unchanged.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Refusal    json.RawMessage `json:"refusal,omitempty"`
	Audio      json.RawMessage `json:"audio,omitempty"`
	// Extra holds fields of a message the type does not name.
	Extra map[string]json.RawMessage `json:"-"`
}

// TextMessage returns a message whose content is the plain string text.
func TextMessage(role, text string) Message {
	b, _ := json.Marshal(text) // a string always marshals
	return Message{Role: role, Content: b}
}

// Text returns the text of the message's content: the string itself, or the
// text parts of an array joined by newlines. Non-text parts contribute nothing.
func (m Message) Text() string {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 || bytes.Equal(c, []byte("null")) {
		return ""
	}
	if c[0] == '"' {
		var s string
		if json.Unmarshal(c, &s) == nil {
			return s
		}
		return ""
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(c, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" {
			continue
		}
		if i > 0 && b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

type messageFields Message

// UnmarshalJSON decodes a message and keeps the fields it does not name.
func (m *Message) UnmarshalJSON(data []byte) error {
	var f messageFields
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	*m = Message(f)
	m.Extra = unknownFields(data, messageNames)
	return nil
}

// MarshalJSON encodes a message with the fields it did not name.
func (m Message) MarshalJSON() ([]byte, error) {
	return withExtra(messageFields(m), m.Extra)
}

type requestFields ChatCompletionRequest

// UnmarshalJSON decodes a request and keeps the fields it does not name.
func (r *ChatCompletionRequest) UnmarshalJSON(data []byte) error {
	var f requestFields
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	*r = ChatCompletionRequest(f)
	r.Extra = unknownFields(data, requestNames)
	return nil
}

// MarshalJSON encodes a request with the fields it did not name.
func (r ChatCompletionRequest) MarshalJSON() ([]byte, error) {
	return withExtra(requestFields(r), r.Extra)
}

// MaxOutputTokens returns the request's limit on generated tokens:
// max_completion_tokens when set, else max_tokens, else 0 (no limit asked).
func (r *ChatCompletionRequest) MaxOutputTokens() int64 {
	switch {
	case r.MaxCompletionTokens != nil:
		return *r.MaxCompletionTokens
	case r.MaxTokens != nil:
		return *r.MaxTokens
	}
	return 0
}

// WantsUsage reports whether the client asked for the final usage chunk of
// a stream.
func (r *ChatCompletionRequest) WantsUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// Validate checks what every engine would reject anyway, so that a bad body
// gets a clear 400 before it costs anything.
func (r *ChatCompletionRequest) Validate() error {
	if r.Model == "" {
		return &FieldError{Param: "model", Msg: "model is required"}
	}
	if len(r.Messages) == 0 {
		return &FieldError{Param: "messages", Msg: "messages must hold at least one message"}
	}
	for i, m := range r.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool", "function":
		default:
			return &FieldError{Param: fmt.Sprintf("messages[%d].role", i), Msg: fmt.Sprintf("unknown role %q", m.Role)}
		}
	}
	if n := r.MaxOutputTokens(); n < 0 || (r.MaxTokens != nil && *r.MaxTokens < 1) || (r.MaxCompletionTokens != nil && *r.MaxCompletionTokens < 1) {
		return &FieldError{Param: "max_tokens", Msg: "max_tokens must be at least 1"}
	}
	if r.N != nil && *r.N != 1 {
		return &FieldError{Param: "n", Msg: "only n=1 is supported"}
	}
	if !r.Stream && r.StreamOptions != nil {
		return &FieldError{Param: "stream_options", Msg: "stream_options is only allowed when stream is true"}
	}
	return nil
}

// FieldError says which request field is wrong; it maps to a 400 whose param
// names the field.
type FieldError struct {
	Param string
	Msg   string
}

func (e *FieldError) Error() string { return e.Msg }
