package tokens

import (
	"encoding/json"
	"unicode"
	"unicode/utf8"

	"github.com/llmplat/llmplat/runtime/openai"
)

// BytesPerToken is the most bytes one token of a word covers: a word of n
// bytes counts ⌈n / BytesPerToken⌉ tokens.
const BytesPerToken = 8

// Chat template overhead in tokens, after Llama 3's template:
//
//	<|begin_of_text|>
//	<|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>   (per message)
//	<|start_header_id|>assistant<|end_header_id|>\n\n                 (generation prompt)
const (
	// BeginTokens is <|begin_of_text|>.
	BeginTokens = 1
	// MessageOverhead is what each message adds besides its text:
	// <|start_header_id|>, the role (one token whatever the role), <|end_header_id|>,
	// the "\n\n" after the header, and <|eot_id|>.
	MessageOverhead = 5
	// AssistantHeaderTokens is the generation prompt that opens the answer:
	// <|start_header_id|>, "assistant", <|end_header_id|>, "\n\n".
	AssistantHeaderTokens = 4
)

// Count returns the number of tokens in text. Text is split into words at
// white space as unicode.IsSpace defines it (the split strings.Fields makes);
// a word of n bytes counts ⌈n/8⌉ tokens, so a word of up to 8 bytes is one
// token, one of 9 to 16 bytes two, and so on. Empty or all-space text counts
// 0. Count does not allocate.
func Count(text string) int64 {
	var n int64
	word := 0 // bytes of the current word
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			if asciiSpace[c] {
				n += wordTokens(word)
				word = 0
			} else {
				word++
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		if unicode.IsSpace(r) {
			n += wordTokens(word)
			word = 0
		} else {
			word += size
		}
	}
	return n + wordTokens(word)
}

// ChatPromptTokens returns the prompt tokens of a chat as an engine with a
// Llama-3-style template sees them: BeginTokens, then for every message
// MessageOverhead plus Count of its text (openai.Message.Text: a string
// content, or the text parts of an array joined by newlines), then
// AssistantHeaderTokens.
func ChatPromptTokens(msgs []openai.Message) int64 {
	n := int64(BeginTokens + AssistantHeaderTokens)
	for _, m := range msgs {
		n += MessageOverhead + Count(m.Text())
	}
	return n
}

// EstimateChat returns an upper bound of ChatPromptTokens(msgs) without
// decoding any JSON: it counts the raw content bytes of each message the way
// Count counts text, splitting words also at quotes and escapes and counting
// every escape sequence as a token of its own. It is what the gateway
// reserves credit with; it never allocates.
//
// Why it bounds: the decoded text of a content is made of literal runs of the
// raw bytes and of escaped characters. A literal run decodes to itself (an
// invalid UTF-8 byte to U+FFFD, three bytes, which the estimate counts as
// three), so its words cost at most what the estimate counts for it; an
// escape decodes to at most four bytes, one token at most. Splitting a word
// into pieces never lowers ⌈n/8⌉ summed over them, so extra splits at
// quotes, escapes and JSON punctuation only raise the estimate, and parts of
// an array that are not text are counted though they count nothing.
func EstimateChat(msgs []openai.Message) int64 {
	n := int64(BeginTokens + AssistantHeaderTokens)
	for i := range msgs {
		n += MessageOverhead + estimateRaw(msgs[i].Content)
	}
	return n
}

// estimateRaw bounds Count of the text a raw JSON content decodes to.
func estimateRaw(raw []byte) int64 {
	var n int64
	word := 0
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			// An escape: \x, or \uXXXX; its character is a token of its own.
			n += wordTokens(word) + 1
			word = 0
			if i+1 < len(raw) && raw[i+1] == 'u' {
				i += 6
			} else {
				i += 2
			}
		case c == '"':
			n += wordTokens(word)
			word = 0
			i++
		case c < utf8.RuneSelf:
			i++
			if asciiSpace[c] {
				n += wordTokens(word)
				word = 0
			} else {
				word++
			}
		default:
			r, size := utf8.DecodeRune(raw[i:])
			i += size
			switch {
			case r == utf8.RuneError && size == 1:
				word += 3 // decodes to U+FFFD, three bytes
			case unicode.IsSpace(r):
				n += wordTokens(word)
				word = 0
			default:
				word += size
			}
		}
	}
	return n + wordTokens(word)
}

func wordTokens(bytes int) int64 {
	return int64((bytes + BytesPerToken - 1) / BytesPerToken)
}

// asciiSpace marks the ASCII bytes unicode.IsSpace reports as space.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// MediaPartTokens is what the estimate counts for each part of a message
// that is not text (an image, audio, a file): engines turn it into prompt
// tokens by an encoder the gateway cannot run. 6,404 is the most Llama 3.2
// Vision gives one image (4 tiles of 1,601); a model whose encoder gives
// more per part needs a larger value here.
const MediaPartTokens = 6404

// EstimateRequest bounds the prompt tokens an engine counts for a whole
// chat request: EstimateChat of its messages, plus what chat templates
// render into the prompt besides the messages' text — the tool and
// function definitions, the assistant messages' tool calls, the tool
// messages' call ids, the messages' other fields — counted as raw JSON text the way EstimateChat
// counts content, and MediaPartTokens for every part that is not text.
func EstimateRequest(r *openai.ChatCompletionRequest) int64 {
	n := EstimateChat(r.Messages) + estimateRaw(r.Tools) + estimateRaw(r.Functions) +
		estimateRaw(r.ToolChoice) + estimateRaw(r.ResponseFormat)
	for i := range r.Messages {
		m := &r.Messages[i]
		n += estimateRaw(m.ToolCalls) + wordTokens(len(m.ToolCallID)) + wordTokens(len(m.Name))
		for _, v := range m.Extra {
			n += estimateRaw(v) // fields a template may render, such as reasoning_content
		}
		n += MediaPartTokens * mediaParts(m.Content)
	}
	return n
}

// mediaParts counts the parts of an array content that are not text; a
// string content has none. Only array contents are decoded, and only
// their parts' types.
func mediaParts(content []byte) int64 {
	i := 0
	for i < len(content) && asciiSpace[content[i]] {
		i++
	}
	if i == len(content) || content[i] != '[' {
		return 0
	}
	var parts []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(content, &parts) != nil {
		return 0
	}
	var n int64
	for _, p := range parts {
		if p.Type != "text" {
			n++
		}
	}
	return n
}
