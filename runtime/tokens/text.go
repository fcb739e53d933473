package tokens

import (
	"unicode"
	"unicode/utf8"

	"github.com/llmplat/llmplat/runtime/jsonscan"
	"github.com/llmplat/llmplat/runtime/openai"
)

// Text is a text counted as the usage bound reads an engine's answer
// (ledger.BoundUsage): its size, its words, and Count of it. Texts add up
// piece by piece (Add), each piece counted alone.
type Text struct {
	// Bytes is the text's length in UTF-8.
	Bytes int64
	// Words is how many runs of non-space it holds (white space as
	// unicode.IsSpace defines it, as Count splits).
	Words int64
	// Inner is how many of its words begin after white space within the
	// text: unlike a word at its very start, none of them can be the end
	// of a word begun in a piece of text before it.
	Inner int64
	// Tokens is Count of the text.
	Tokens int64
}

// Add adds another piece's counts to t.
func (t *Text) Add(o Text) {
	t.Bytes += o.Bytes
	t.Words += o.Words
	t.Inner += o.Inner
	t.Tokens += o.Tokens
}

// TextOfJSON counts the text a JSON string span (quotes included, as
// jsonscan returns a value) decodes to, as encoding/json decodes it:
// escapes resolved, invalid UTF-8 and lone surrogates as U+FFFD. It
// reports false, and counts nothing, for a span that is not a
// well-formed string. It never allocates.
func TextOfJSON(v []byte) (Text, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return Text{}, false
	}
	var (
		t     Text
		word  = 0 // bytes of the word being read
		space = false
	)
	end := func() {
		if word > 0 {
			t.Words++
			t.Tokens += wordTokens(word)
			word = 0
		}
	}
	for s := v[1 : len(v)-1]; len(s) > 0; {
		c := s[0]
		var r rune
		n, size := 1, 1
		switch {
		case c < utf8.RuneSelf && c != '\\' && c != '"' && c >= ' ':
			r = rune(c) // the common case, without a call
		default:
			r, n = jsonscan.StringRune(s)
			if n == 0 {
				return Text{}, false
			}
			size = utf8.RuneLen(r)
		}
		s = s[n:]
		t.Bytes += int64(size)
		if isSpace(r) {
			end()
			space = true
			continue
		}
		if word == 0 && space {
			t.Inner++
		}
		word += size
	}
	end()
	return t, true
}

// isSpace is unicode.IsSpace, with a table for ASCII.
func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiSpace[r]
	}
	return unicode.IsSpace(r)
}

// TextOf counts a decoded text as TextOfJSON counts a string span.
func TextOf(text string) Text {
	var t Text
	word, space := 0, false
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		if isSpace(r) {
			if word > 0 {
				t.Words++
				t.Tokens += wordTokens(word)
			}
			word, space = 0, true
			continue
		}
		if word == 0 && space {
			t.Inner++
		}
		word += size
	}
	if word > 0 {
		t.Words++
		t.Tokens += wordTokens(word)
	}
	t.Bytes = int64(len(text))
	return t
}

// PromptWords is a floor of the prompt tokens any engine counts for msgs:
// the words of the system, developer and user messages' text. Every
// tokenizer an engine runs (byte-pair encodings behind a white-space
// pre-split, as GPT-2's and Llama 3's; SentencePiece splitting by white
// space) gives each word at least one token of its own, and chat templates
// render those messages' text whole, whatever else they add. Assistant
// and tool messages are left out: templates may drop parts of them (the
// reasoning of earlier turns, tool results they summarise). Parts that
// are not text add nothing. It reads the raw contents and never
// allocates.
func PromptWords(msgs []openai.Message) int64 {
	var n int64
	for i := range msgs {
		switch msgs[i].Role {
		case "system", "developer", "user":
			n += contentWords(msgs[i].Content)
		}
	}
	return n
}

// contentWords counts the words of a raw content: a string, or an array
// of parts whose text parts count. Anything else counts nothing.
func contentWords(raw []byte) int64 {
	v, ok := jsonscan.Value(raw)
	if !ok {
		return 0
	}
	if t, ok := TextOfJSON(v); ok {
		return t.Words
	}
	var n int64
	parts := jsonscan.Elements(v)
	for p, more := parts.Next(); more; p, more = parts.Next() {
		w, ok := partWords(p)
		if !ok {
			return 0 // a content engines would not read as text
		}
		n += w
	}
	if parts.Malformed() {
		return 0
	}
	return n
}

// partNames are the members of a content part that partWords reads.
var partNames = []string{"type", "text"}

// partWords counts the words of a part, 0 for a part that is not text. It
// reports false for a part it cannot read exactly (a key written in
// another way, or twice) and for a text part whose text is not a string.
func partWords(part []byte) (int64, bool) {
	var typ, text []byte
	o := jsonscan.Members(part)
	for k, v, more := o.Next(); more; k, v, more = o.Next() {
		i, plain := jsonscan.Match(k, partNames)
		switch {
		case !plain:
			return 0, false
		case i == 0 && typ == nil:
			typ = v
		case i == 1 && text == nil:
			text = v
		case i >= 0:
			return 0, false
		}
	}
	if o.Malformed() {
		return 0, false
	}
	if string(typ) != `"text"` {
		return 0, true
	}
	t, ok := TextOfJSON(text)
	return t.Words, ok
}
