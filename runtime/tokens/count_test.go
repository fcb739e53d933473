package tokens

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/openai"
)

func TestCount(t *testing.T) {
	tests := []struct {
		name string
		text string
		want int64
	}{
		{"empty", "", 0},
		{"only space", " \t\n\r\v\f ", 0},
		{"one word", "hello", 1},
		{"eight bytes", "abcdefgh", 1},
		{"nine bytes", "abcdefghi", 2},
		{"sixteen bytes", "abcdefghijklmnop", 2},
		{"seventeen bytes", "abcdefghijklmnopq", 3},
		{"words", "The quick brown fox", 4},
		{"leading and trailing space", "  a  b  ", 2},
		{"multibyte word counts bytes", "ééééé", 2}, // 10 bytes
		{"no-break space splits", "a\u00a0b", 2},
		{"ideographic space splits", "a\u3000b", 2},
		{"line separator splits", "a\u2028b", 2},
		{"next line splits", "a\u0085b", 2},
		{"zero width space does not split", "a\u200bb", 1},
		{"invalid utf-8 is one byte each", "\xff\xfe", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Count(tt.text); got != tt.want {
				t.Errorf("Count(%q) = %d, want %d", tt.text, got, tt.want)
			}
		})
	}
}

// TestCountMatchesFields checks Count against its definition written the
// slow way: strings.Fields, then ⌈bytes/8⌉ per word.
func TestCountMatchesFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		text := randomText(rng, 60)
		var want int64
		for _, w := range strings.Fields(text) {
			want += int64((len(w) + 7) / 8)
		}
		if got := Count(text); got != want {
			t.Fatalf("case %d: Count(%q) = %d, want %d", i, text, got, want)
		}
	}
}

func TestCountDoesNotAllocate(t *testing.T) {
	text := strings.Repeat("lorem ipsum dolor sit amet, consectetur ", 100)
	if got := testing.AllocsPerRun(100, func() { Count(text) }); got != 0 {
		t.Errorf("Count allocates %v times per call, want 0", got)
	}
}

func TestChatPromptTokens(t *testing.T) {
	tests := []struct {
		name string
		msgs []openai.Message
		want int64
	}{
		{"no messages", nil, BeginTokens + AssistantHeaderTokens},
		{"one user message", []openai.Message{openai.TextMessage("user", "Hello there")}, 1 + 5 + 2 + 4},
		{"system and user", []openai.Message{
			openai.TextMessage("system", "Be brief."),
			openai.TextMessage("user", "What is a KV cache?"),
		}, 1 + (5 + 2) + (5 + 5) + 4},
		{"empty content", []openai.Message{{Role: "assistant"}}, 1 + 5 + 4},
		{"text parts", []openai.Message{{Role: "user", Content: json.RawMessage(
			`[{"type":"text","text":"one two"},{"type":"image_url","image_url":{"url":"data:x"}},{"type":"text","text":"three"}]`)}},
			1 + 5 + 3 + 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ChatPromptTokens(tt.msgs); got != tt.want {
				t.Errorf("ChatPromptTokens = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestEstimateChatBoundsTable(t *testing.T) {
	tests := []struct {
		name    string
		content string // raw JSON
	}{
		{"plain", `"Hello world"`},
		{"single letters", `"a b c d e f g"`},
		{"escaped newlines", `"a\nb\nc\nd"`},
		{"escaped space", `"a\u0020b\u0020c"`},
		{"escaped no-break space", `"a\u00a0b"`},
		{"surrogate pair", `"x\ud83d\ude00y"`},
		{"escaped quotes", `"say \"hi\" now"`},
		{"html escapes", `"\u003cb\u003e \u0026"`},
		{"raw invalid utf-8", "\"\xff \xff\xff\xff\xff\xff\xff\xff\xff \xfe\""},
		{"long word", `"Pneumonoultramicroscopicsilicovolcanoconiosis"`},
		{"parts", `[{"type":"text","text":"a b"},{"type":"text","text":"c"}]`},
		{"padded", "  \"a b\"  "},
		{"not json", `a b c`},
		{"null", `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := []openai.Message{{Role: "user", Content: json.RawMessage(tt.content)}}
			got, exact := EstimateChat(msgs), ChatPromptTokens(msgs)
			if got < exact {
				t.Errorf("EstimateChat = %d, below ChatPromptTokens = %d", got, exact)
			}
		})
	}
}

// TestEstimateChatExactForPlainText checks the estimate does not overshoot
// text without escapes: it is then the exact count.
func TestEstimateChatExactForPlainText(t *testing.T) {
	msgs := []openai.Message{
		openai.TextMessage("system", "You answer in one line."),
		openai.TextMessage("user", "How many streams fit on an L40S at 2k context?"),
	}
	if got, want := EstimateChat(msgs), ChatPromptTokens(msgs); got != want {
		t.Errorf("EstimateChat = %d, want %d", got, want)
	}
}

func TestEstimateChatDoesNotAllocate(t *testing.T) {
	msgs := []openai.Message{openai.TextMessage("user", strings.Repeat("word \u00e9t\u00e9 \n", 500))}
	if got := testing.AllocsPerRun(100, func() { EstimateChat(msgs) }); got != 0 {
		t.Errorf("EstimateChat allocates %v times per call, want 0", got)
	}
}

// TestEstimateChatBoundsRandom is the property over many seeded random
// chats: contents as JSON strings (with the escapes json.Marshal makes),
// as arrays of parts, and as raw strings with bytes json.Marshal would
// never write.
func TestEstimateChatBoundsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 20000 {
		msgs := randomChat(rng)
		got, exact := EstimateChat(msgs), ChatPromptTokens(msgs)
		if got < exact {
			b, _ := json.Marshal(msgs)
			t.Fatalf("case %d: EstimateChat = %d, below ChatPromptTokens = %d for %s", i, got, exact, b)
		}
	}
}

func FuzzEstimateChat(f *testing.F) {
	for _, s := range []string{`"a b"`, `"a\nb"`, `"\u00e9\u00e9"`, "\"\xff\xff\"", `[{"type":"text","text":"x y"}]`, `"\\u0020"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		msgs := []openai.Message{{Role: "user", Content: raw}}
		if got, exact := EstimateChat(msgs), ChatPromptTokens(msgs); got < exact {
			t.Errorf("EstimateChat = %d, below ChatPromptTokens = %d for %q", got, exact, raw)
		}
	})
}

// alphabet mixes what moves the counts: ASCII letters, ASCII and Unicode
// spaces, multibyte letters, characters JSON escapes, invalid bytes.
var alphabet = []string{
	"a", "b", "z", "Q", "0", ".", " ", " ", " ", "\t", "\n", "\r", "\u00a0", "\u3000", "\u2028", "\u0085",
	"é", "漢", "😀", "\"", "\\", "<", "&", "\x00", "\x1f", "\xff", "\xc3", "\u200b",
}

func randomText(rng *rand.Rand, maxPieces int) string {
	var b strings.Builder
	for range rng.IntN(maxPieces + 1) {
		if rng.IntN(8) == 0 {
			b.WriteString(strings.Repeat("x", rng.IntN(20))) // long words
			continue
		}
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

func randomChat(rng *rand.Rand) []openai.Message {
	msgs := make([]openai.Message, rng.IntN(4))
	for i := range msgs {
		text := randomText(rng, 40)
		var raw []byte
		switch rng.IntN(3) {
		case 0:
			raw, _ = json.Marshal(text)
		case 1:
			parts := []map[string]any{{"type": "text", "text": text}, {"type": "image_url", "image_url": map[string]string{"url": "x"}}, {"type": "text", "text": randomText(rng, 10)}}
			raw, _ = json.Marshal(parts)
		default:
			// Raw bytes in quotes: invalid UTF-8 and control bytes survive
			// into what json.Unmarshal sees.
			raw = []byte(`"` + strings.NewReplacer(`"`, `\"`, `\`, `\\`).Replace(text) + `"`)
		}
		msgs[i] = openai.Message{Role: "user", Content: raw}
	}
	return msgs
}
