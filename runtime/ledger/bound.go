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
}

// Correction is the set of changes BoundUsage made to a reported usage.
type Correction uint8

// The corrections BoundUsage makes.
const (
	// UnderReported: the usage counted fewer completion tokens than the
	// platform relayed; what was relayed is billed.
	UnderReported Correction = 1 << iota
	// OverReserved: a count went past what the reservation allows; the
	// bound is billed.
	OverReserved
	// Negative: a count was negative; it counts as zero (a prompt then
	// falls under the partial rule where that applies).
	Negative
)

// correctionNames are the corrections' names, in bit order: the values of
// a metric's reason label.
var correctionNames = [...]string{"under_reported", "over_reserved", "negative"}

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
// settle. It returns the usage to bill and what it corrected:
//
//   - a negative count is zero (Negative);
//   - the completion is at least relayed, the platform's own count of the
//     content events it relayed to the client (UnderReported): an engine
//     that says less cannot make delivered output free;
//   - the completion is at most the reservation's output cap, and the
//     prompt at most the estimate plus the cap less the completion — the
//     tokens the reservation held, as the relay's mid-stream check reads
//     them (OverReserved): a report beyond them cannot inflate the books,
//     the usage report or the key's day.
//
// The ceiling comes last: a reservation is all admission checked against
// the balance, so nothing beyond it is ever billed. Pass relayed 0 when
// the platform did not count (a done record, a sweep).
func BoundUsage(reported Usage, relayed int64, b Bounds) (Usage, Correction) {
	u := reported
	var c Correction
	if u.PromptTokens < 0 {
		u.PromptTokens, c = 0, c|Negative
	}
	if u.CompletionTokens < 0 {
		u.CompletionTokens, c = 0, c|Negative
	}
	if relayed > u.CompletionTokens {
		u.CompletionTokens, c = relayed, c|UnderReported
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
