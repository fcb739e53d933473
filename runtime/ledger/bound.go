package ledger

import (
	"math"
	"strings"
)

// Bounds are what a reservation lets a settle bill, in tokens: the prompt
// estimate it reserved and the output cap the engine was sent
// (usage_ledger.prompt_tokens and max_output_tokens of the reserved row).
type Bounds struct {
	PromptEstimate int64
	// MaxOutput is the output cap; 0 means not known (a row reserved
	// before the cap was stored): no ceiling then, only the cost cap.
	MaxOutput int64
	// PromptFloor is the fewest prompt tokens any engine can count for
	// the request: the words of its prompt's text (tokens.PromptWords),
	// never more than PromptEstimate. 0 means not known (a row has no
	// floor): no floor then.
	PromptFloor int64
	// StopBytes is the size of the request's stop sequences: an engine
	// generates the tokens of the one it meets, and counts them, but cuts
	// it from the text it sends.
	StopBytes int64
}

// HiddenTokens is how many tokens an answer, and each tool call in it,
// may hold beyond what its relayed text shows (Relayed.ceiling): the
// end-of-sequence token, the tags a reasoning parser strips (<think>,
// </think>), the channel markup of harmony-format models, a tool parser's
// markup around a call's name and arguments (<tool_call>, {"name": …,
// "arguments": …}, [TOOL_CALLS]), each a few to a dozen tokens. 32 covers
// them with room; it is the most a node can add to an answer's bill past
// its text's bytes.
const HiddenTokens = 32

// Relayed is the platform's own count of what it relayed to a request's
// client, the text of every event with output counted as the client
// decodes it (tokens.Text): what a reported completion is judged by. Its
// zero value counted nothing — a node's done record, a sweep, a kept
// settle — and then bounds nothing but the reservation.
type Relayed struct {
	// Counted is set once the platform relayed the answer, even when it
	// carried no output: only then do the counts below bound a report.
	Counted bool
	// Chunks is how many events carried output.
	Chunks int64
	// Words is how many words began inside an event (tokens.Text.Inner):
	// the answer's text holds at least as many words.
	Words int64
	// Bytes is the length of the text in UTF-8.
	Bytes int64
	// Tokens is the stand-in tokenizer's count of the text, at least one
	// an event (AddChunk): the count billed when a report is implausible.
	Tokens int64
	// Calls is how many tool calls the events named.
	Calls int64
}

// AddChunk counts one relayed event with output: its text's bytes, the
// words that began inside it, its stand-in count (tokens.Text) and the
// tool calls it named.
func (r *Relayed) AddChunk(bytes, words, tokens, calls int64) {
	r.Counted = true
	r.Chunks++
	r.Bytes += bytes
	r.Words += words
	r.Tokens += max(tokens, 1)
	r.Calls += calls
}

// Floor is the fewest completion tokens any engine can have generated for
// what was relayed. Every tokenizer engines run splits text at white
// space before it merges (byte-pair encodings behind a pre-split regex,
// as GPT-2's and Llama 3's; SentencePiece with split_by_whitespace), so no
// token spans two words and a text holds at least as many tokens as
// words; and an engine streams an event only for a token it generated,
// so at least one token an event. Words are counted only where they begin
// inside an event: an engine that holds text back for a stop sequence
// cuts its events inside words, and a word cut so must not count twice.
func (r Relayed) Floor() int64 { return max(r.Chunks, r.Words) }

// ceiling is the most completion tokens an engine can have generated for
// what was relayed: every token an engine shows is at least one byte of
// text; the rest are the tokens it holds back — HiddenTokens for the
// answer and for each tool call, one an event, and the stop sequence it
// cut.
func (r Relayed) ceiling(b Bounds) int64 {
	hidden := HiddenTokens * (1 + max(r.Calls, 0))
	return addSaturating(addSaturating(max(r.Bytes, 0)+max(r.Chunks, 0), hidden), max(b.StopBytes, 0))
}

// Correction is the set of changes BoundUsage made to a reported usage.
type Correction uint8

// The corrections BoundUsage makes.
const (
	// UnderReported: the usage counted fewer completion tokens than the
	// text relayed holds; the platform's own count is billed.
	UnderReported Correction = 1 << iota
	// OverReserved: a count went past what the reservation allows; the
	// bound is billed.
	OverReserved
	// Negative: a count was negative; it counts as zero (a prompt then
	// falls under the partial rule where that applies).
	Negative
	// OverReported: the usage counted more completion tokens than the
	// text relayed can hold; the platform's own count is billed.
	OverReported
	// ImplausiblePrompt: the usage counted fewer prompt tokens than the
	// prompt's text has words; the reserved estimate is billed.
	ImplausiblePrompt
)

// correctionNames are the corrections' names, in bit order: the values of
// a metric's reason label.
var correctionNames = [...]string{"under_reported", "over_reserved", "negative", "over_reported", "implausible_prompt"}

// Reasons returns the names of the corrections in c, in a fixed order.
func (c Correction) Reasons() []string {
	var out []string
	for i, name := range correctionNames {
		if c&(1<<i) != 0 {
			out = append(out, name)
		}
	}
	return out
}

// String returns the corrections' names joined by commas, "" for none.
func (c Correction) String() string { return strings.Join(c.Reasons(), ",") }

// BoundUsage is the one rule for the counts a settle may bill, whoever
// reported them — an engine's usage chunk, a node's done record, a kept
// settle — and for the usage the client is shown. It returns the usage to
// bill and what it corrected:
//
//   - a negative count is zero (Negative);
//   - when the platform counted what it relayed (relayed.Counted), the
//     reported completion stands only within the tolerance of that text:
//     at least relayed.Floor() (its words, one token an event) and at
//     most relayed.ceiling(b) (its bytes, one an event, HiddenTokens and
//     the stop sequences). Outside it the platform's own count,
//     relayed.Tokens, is billed (UnderReported, OverReported): a node or
//     an engine can move the bill only as far as a real tokenizer could;
//   - the prompt is at least b.PromptFloor, the words of the prompt's
//     text; a report below it bills the reserved estimate
//     (ImplausiblePrompt). The prompt has no ceiling of its own but the
//     reservation's: a chat template's own text (default system prompts,
//     tool instructions) and an image's or a sound's encoder give honest
//     engines counts far past anything the gateway can count;
//   - the completion is at most the reservation's output cap, and the
//     prompt at most the estimate plus the cap less the completion — the
//     tokens the reservation held, as the relay's mid-stream check reads
//     them (OverReserved): a report beyond them cannot inflate the books,
//     the usage report or the key's day.
//
// The ceiling comes last: a reservation is all admission checked against
// the balance, so nothing beyond it is ever billed. Pass the zero
// Relayed when the platform did not count (a done record, a sweep).
func BoundUsage(reported Usage, relayed Relayed, b Bounds) (Usage, Correction) {
	u := reported
	var c Correction
	if u.PromptTokens < 0 {
		u.PromptTokens, c = 0, c|Negative
	}
	if u.CompletionTokens < 0 {
		u.CompletionTokens, c = 0, c|Negative
	}
	if relayed.Counted {
		switch {
		case u.CompletionTokens < relayed.Floor():
			u.CompletionTokens, c = max(relayed.Tokens, relayed.Floor()), c|UnderReported
		case u.CompletionTokens > relayed.ceiling(b):
			u.CompletionTokens, c = min(max(relayed.Tokens, 0), relayed.ceiling(b)), c|OverReported
		}
	}
	if b.PromptFloor > 0 && u.PromptTokens < b.PromptFloor {
		u.PromptTokens, c = max(b.PromptEstimate, b.PromptFloor), c|ImplausiblePrompt
	}
	if b.MaxOutput > 0 {
		if u.CompletionTokens > b.MaxOutput {
			u.CompletionTokens, c = b.MaxOutput, c|OverReserved
		}
		if room := addSaturating(max(b.PromptEstimate, 0), b.MaxOutput) - u.CompletionTokens; u.PromptTokens > room {
			u.PromptTokens, c = room, c|OverReserved
		}
	}
	return u, c
}

// addSaturating returns a+b for non-negative a and b, or math.MaxInt64
// when that overflows.
func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
