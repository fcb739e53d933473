package tokens

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"

	"github.com/llmplat/llmplat/runtime/openai"
)

func TestTextOfJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Text
	}{
		{"empty", `""`, Text{}},
		{"one word", `"hello"`, Text{Bytes: 5, Words: 1, Tokens: 1}},
		{"a word continued from before", `"lo world"`, Text{Bytes: 8, Words: 2, Inner: 1, Tokens: 2}},
		{"a leading space", `" the model"`, Text{Bytes: 10, Words: 2, Inner: 2, Tokens: 2}},
		{"escaped white space splits", `"a\nb\tc"`, Text{Bytes: 5, Words: 3, Inner: 2, Tokens: 3}},
		{"an escaped letter joins", `"\u0061bcdefghi"`, Text{Bytes: 9, Words: 1, Tokens: 2}},
		{"escaped multibyte letters", `"\u00e9\u00e9\u00e9\u00e9\u00e9"`, Text{Bytes: 10, Words: 1, Tokens: 2}},
		{"a surrogate pair", `"\ud83d\ude00"`, Text{Bytes: 4, Words: 1, Tokens: 1}},
		{"a lone surrogate is U+FFFD", `"\ud83d"`, Text{Bytes: 3, Words: 1, Tokens: 1}},
		{"invalid UTF-8 is U+FFFD", "\"\xff\xff\xff\"", Text{Bytes: 9, Words: 1, Tokens: 2}},
		{"an escaped no-break space splits", `"a\u00a0b"`, Text{Bytes: 4, Words: 2, Inner: 1, Tokens: 2}},
		{"only space", `" \n "`, Text{Bytes: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := TextOfJSON([]byte(tt.in))
			if !ok || got != tt.want {
				t.Errorf("TextOfJSON(%s) = %+v, %v; want %+v", tt.in, got, ok, tt.want)
			}
		})
	}
	for _, bad := range []string{``, `"`, `abc`, `"a\x"`, `"a"b"`, "\"a\x01\"", `"\u12"`, `null`, `5`} {
		if got, ok := TextOfJSON([]byte(bad)); ok || got != (Text{}) {
			t.Errorf("TextOfJSON(%q) = %+v, %v; want nothing, false", bad, got, ok)
		}
	}
}

func TestTextOfJSONDoesNotAllocate(t *testing.T) {
	v := []byte(`" the model serves tokens \u00e9\n"`)
	if n := testing.AllocsPerRun(100, func() { TextOfJSON(v) }); n != 0 {
		t.Errorf("TextOfJSON allocates %v times", n)
	}
}

// TestTextBoundsTheTokens checks, on random texts cut into random pieces
// as an engine's chunks cut an answer, the facts the usage bound stands
// on: the inner words of the pieces never pass the words of the whole,
// words never pass Count, Count never passes the bytes, and Count of the
// pieces passes Count of the whole by at most one a cut.
func TestTextBoundsTheTokens(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 5000 {
		text := strings.ToValidUTF8(randomText(rng, 80), "\uFFFD")
		whole := TextOf(text)
		var sum Text
		cuts := 0
		for rest := text; rest != ""; cuts++ {
			n := min(len(rest), 1+rng.IntN(12))
			for n < len(rest) && !utfStart(rest[n]) {
				n++
			}
			sum.Add(TextOf(rest[:n]))
			rest = rest[n:]
		}
		switch {
		case sum.Inner > whole.Words:
			t.Fatalf("case %d: %q: inner words of the pieces %d > words of the whole %d", i, text, sum.Inner, whole.Words)
		case whole.Words > whole.Tokens || whole.Tokens > whole.Bytes:
			t.Fatalf("case %d: %q: %+v, want words ≤ tokens ≤ bytes", i, text, whole)
		case sum.Bytes != whole.Bytes || sum.Tokens < whole.Tokens || sum.Tokens > whole.Tokens+int64(cuts):
			t.Fatalf("case %d: %q: pieces %+v, whole %+v, %d pieces", i, text, sum, whole, cuts)
		}
	}
}

func utfStart(b byte) bool { return b&0xC0 != 0x80 }

// FuzzTextOfJSON checks TextOfJSON against the text encoding/json
// decodes and its definition the slow way: strings.FieldsFunc, then Count.
func FuzzTextOfJSON(f *testing.F) {
	for _, s := range []string{`"a b"`, `"a\nb"`, `"\u00e9\u00e9"`, "\"\xff\xff\"", `"\ud83d\ude00 x"`, `"\ud83d"`, `"a\u3000b"`, `"\u0085x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := TextOfJSON(raw)
		var s string
		decoded := len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && json.Unmarshal(raw, &s) == nil
		if ok != decoded {
			t.Fatalf("TextOfJSON(%q) ok = %v; encoding/json decodes it: %v", raw, ok, decoded)
		}
		if !ok {
			return
		}
		words := strings.FieldsFunc(s, unicode.IsSpace)
		want := TextOf(s)
		if got != want || want.Tokens != Count(s) || want.Words != int64(len(words)) || want.Bytes != int64(len(s)) {
			t.Fatalf("TextOfJSON(%q) = %+v; the decoded %q counts %+v (Count %d, %d words)", raw, got, s, want, Count(s), len(words))
		}
	})
}

func TestPromptWords(t *testing.T) {
	msg := func(role, content string) openai.Message {
		return openai.Message{Role: role, Content: json.RawMessage(content)}
	}
	tests := []struct {
		name string
		msgs []openai.Message
		want int64
	}{
		{"a user's string", []openai.Message{msg("user", `"a secret prompt about llamas"`)}, 5},
		{"system, developer and user count", []openai.Message{msg("system", `"be brief"`), msg("developer", `"x"`), msg("user", `"hi there"`)}, 5},
		{"assistant and tool messages do not", []openai.Message{msg("assistant", `"a b c"`), msg("tool", `"d e"`), msg("user", `"f"`)}, 1},
		{"text parts count, an image adds nothing", []openai.Message{msg("user", `[{"type":"text","text":"two words"},{"type":"image_url","image_url":{"url":"x"}},{"text":"three more words","type":"text"}]`)}, 5},
		{"escapes decoded", []openai.Message{msg("user", `"a\nb\u00a0c"`)}, 3},
		{"a part read two ways counts nothing", []openai.Message{msg("user", `[{"type":"text","text":"a b","text":"c"}]`)}, 0},
		{"a text part whose text is no string", []openai.Message{msg("user", `[{"type":"text","text":"a b"},{"type":"text","text":5}]`)}, 0},
		{"no content", []openai.Message{msg("user", ``), msg("user", `null`)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PromptWords(tt.msgs); got != tt.want {
				t.Errorf("PromptWords = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestPromptWordsBoundedByTheSimulatorsCount: the floor never passes the
// count of the engine the tests run (ChatPromptTokens), on random chats.
func TestPromptWordsBoundedByTheSimulatorsCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 5000 {
		msgs := randomChat(rng)
		if got, exact := PromptWords(msgs), ChatPromptTokens(msgs); got > exact {
			t.Fatalf("case %d: PromptWords = %d > ChatPromptTokens = %d for %+v", i, got, exact, msgs)
		}
	}
}

func TestPromptWordsDoesNotAllocate(t *testing.T) {
	msgs := []openai.Message{{Role: "user", Content: json.RawMessage(`[{"type":"text","text":"two words"},{"type":"image_url","image_url":{"url":"x"}}]`)}}
	if n := testing.AllocsPerRun(100, func() { PromptWords(msgs) }); n != 0 {
		t.Errorf("PromptWords allocates %v times", n)
	}
}
