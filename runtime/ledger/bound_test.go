package ledger

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmplat/llmplat/runtime/tokens"
)

// huge is the count a hostile node reported in issue 29: 2^62 tokens.
const huge = int64(1) << 62

// relayedChunks is what a relay counts of n chunks of one short word
// each: the simulator's answer of n tokens.
func relayedChunks(n int64) Relayed {
	var r Relayed
	r.Counted = true
	for range n {
		r.AddChunk(4, 1, 1, 0)
	}
	return r
}

func TestBoundUsage(t *testing.T) {
	b := Bounds{PromptEstimate: 1000, MaxOutput: 500}
	floored := Bounds{PromptEstimate: 1000, MaxOutput: 500, PromptFloor: 300}
	oneChunk := Relayed{Counted: true, Chunks: 1, Words: 3749, Bytes: 3750 * 5, Tokens: 3750}
	tests := []struct {
		name     string
		reported Usage
		relayed  Relayed
		bounds   Bounds
		want     Usage
		wantC    Correction
	}{
		{"within the reservation", Usage{PromptTokens: 900, CompletionTokens: 300}, relayedChunks(300), b, Usage{PromptTokens: 900, CompletionTokens: 300}, 0},
		{"more reported than relayed, within the text's bytes", Usage{PromptTokens: 900, CompletionTokens: 40}, relayedChunks(10), b, Usage{PromptTokens: 900, CompletionTokens: 40}, 0},
		{"more than the text can hold", Usage{PromptTokens: 900, CompletionTokens: 51 + HiddenTokens}, relayedChunks(10), b, Usage{PromptTokens: 900, CompletionTokens: 10}, OverReported},
		{"the stop sequence's bytes are tolerated", Usage{PromptTokens: 900, CompletionTokens: 60 + HiddenTokens}, relayedChunks(10),
			Bounds{PromptEstimate: 1000, MaxOutput: 500, StopBytes: 10}, Usage{PromptTokens: 900, CompletionTokens: 60 + HiddenTokens}, 0},
		{"fewer reported than relayed", Usage{PromptTokens: 900, CompletionTokens: 1}, relayedChunks(50), b, Usage{PromptTokens: 900, CompletionTokens: 50}, UnderReported},
		{"fewer than the words of one chunk", Usage{PromptTokens: 900, CompletionTokens: 1}, oneChunk, Bounds{PromptEstimate: 1000, MaxOutput: 4096},
			Usage{PromptTokens: 900, CompletionTokens: 3750}, UnderReported},
		{"huge counts", Usage{PromptTokens: huge, CompletionTokens: huge}, relayedChunks(50), b, Usage{PromptTokens: 1450, CompletionTokens: 50}, OverReported | OverReserved},
		{"huge counts, nothing counted", Usage{PromptTokens: huge, CompletionTokens: huge}, Relayed{}, b, Usage{PromptTokens: 1000, CompletionTokens: 500}, OverReserved},
		{"huge counts for an answer without output", Usage{PromptTokens: 900, CompletionTokens: huge}, Relayed{Counted: true}, b, Usage{PromptTokens: 900}, OverReported},
		{"largest counts", Usage{PromptTokens: math.MaxInt64, CompletionTokens: math.MaxInt64}, Relayed{}, Bounds{PromptEstimate: math.MaxInt64, MaxOutput: math.MaxInt64},
			Usage{PromptTokens: 0, CompletionTokens: math.MaxInt64}, OverReserved},
		{"a prompt past the estimate that fits the output left", Usage{PromptTokens: 1200, CompletionTokens: 100}, relayedChunks(100), b, Usage{PromptTokens: 1200, CompletionTokens: 100}, 0},
		{"a prompt past estimate and output", Usage{PromptTokens: 1200, CompletionTokens: 400}, relayedChunks(400), b, Usage{PromptTokens: 1100, CompletionTokens: 400}, OverReserved},
		{"a prompt below its words", Usage{PromptTokens: 1, CompletionTokens: 10}, relayedChunks(10), floored, Usage{PromptTokens: 1000, CompletionTokens: 10}, ImplausiblePrompt},
		{"a prompt at its words", Usage{PromptTokens: 300, CompletionTokens: 10}, relayedChunks(10), floored, Usage{PromptTokens: 300, CompletionTokens: 10}, 0},
		{"negative counts", Usage{PromptTokens: -5, CompletionTokens: -huge}, Relayed{}, b, Usage{}, Negative},
		{"negative counts, a floor and chunks", Usage{PromptTokens: -5, CompletionTokens: -huge}, relayedChunks(5), floored,
			Usage{PromptTokens: 1000, CompletionTokens: 5}, Negative | UnderReported | ImplausiblePrompt},
		{"negative completion, chunks relayed", Usage{PromptTokens: 900, CompletionTokens: -1}, relayedChunks(50), b, Usage{PromptTokens: 900, CompletionTokens: 50}, Negative | UnderReported},
		{"relayed past the cap", Usage{PromptTokens: 900, CompletionTokens: 1}, relayedChunks(501), b, Usage{PromptTokens: 900, CompletionTokens: 500}, UnderReported | OverReserved},
		{"no cap known: no ceiling but the text's", Usage{PromptTokens: huge, CompletionTokens: huge}, Relayed{}, Bounds{PromptEstimate: 1000}, Usage{PromptTokens: huge, CompletionTokens: huge}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, c := BoundUsage(tt.reported, tt.relayed, tt.bounds)
			if got != tt.want || c != tt.wantC {
				t.Errorf("BoundUsage(%+v, %+v, %+v) = %+v, %q; want %+v, %q", tt.reported, tt.relayed, tt.bounds, got, c, tt.want, tt.wantC)
			}
		})
	}
}

func TestCorrectionReasons(t *testing.T) {
	all := UnderReported | OverReserved | Negative | OverReported | ImplausiblePrompt
	if got := all.String(); got != "under_reported,over_reserved,negative,over_reported,implausible_prompt" {
		t.Errorf("String = %q", got)
	}
	if got := Correction(0).Reasons(); len(got) != 0 {
		t.Errorf("Reasons of none = %v", got)
	}
}

// TestRelayedCountWithinItsTolerance cuts random texts into random
// chunks, as an engine's events cut an answer (inside words too, as one
// holding text back for a stop sequence does), and checks what the
// tolerance stands on: the platform's own count lies between the floor
// and the ceiling, and so does the stand-in count of the whole text, the
// count of the simulator, which is never corrected.
func TestRelayedCountWithinItsTolerance(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 2))
	words := []string{"a", "the", "model", "tokens", "abcdefgh", "abcdefghijk", "é", "漢字", "😀", "x.y", "{\"a\":1}"}
	spaces := []string{" ", " ", "\n", "\t", "\u00a0", "  "}
	for i := range 5000 {
		var text strings.Builder
		for range 1 + rng.IntN(60) {
			if rng.IntN(3) == 0 {
				text.WriteString(spaces[rng.IntN(len(spaces))])
			}
			text.WriteString(words[rng.IntN(len(words))])
		}
		whole := tokens.TextOf(text.String())
		var r Relayed
		r.Counted = true
		for rest := text.String(); rest != ""; {
			n := min(len(rest), 1+rng.IntN(16))
			for n < len(rest) && !utf8.RuneStart(rest[n]) {
				n++
			}
			c := tokens.TextOf(rest[:n])
			r.AddChunk(c.Bytes, c.Inner, c.Tokens, 0)
			rest = rest[n:]
		}
		b := Bounds{PromptEstimate: 10}
		if r.Floor() > r.Tokens || r.Tokens > r.ceiling(b) {
			t.Fatalf("case %d: %q: our count %d outside [%d, %d]", i, text.String(), r.Tokens, r.Floor(), r.ceiling(b))
		}
		if r.Words > whole.Words {
			t.Fatalf("case %d: %q: %d words begun in chunks, %d in the whole", i, text.String(), r.Words, whole.Words)
		}
		if whole.Tokens < r.Words || whole.Tokens > r.ceiling(b) {
			t.Fatalf("case %d: %q: the whole's count %d outside [%d words, %d]", i, text.String(), whole.Tokens, r.Words, r.ceiling(b))
		}
	}
}

// TestSimulatorsAnswersAreNeverCorrected: the simulator's answer — tokens
// of one word each, " word" after the first, coalesced into chunks of any
// size — is counted exactly, and its usage stands.
func TestSimulatorsAnswersAreNeverCorrected(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	vocabulary := []string{"the", "model", "serves", "tokens", "abcdefgh", "a"}
	for i := range 2000 {
		n := 1 + rng.IntN(300)
		var r Relayed
		r.Counted = true
		var chunk strings.Builder
		for k := range n {
			if k > 0 {
				chunk.WriteByte(' ')
			}
			chunk.WriteString(vocabulary[rng.IntN(len(vocabulary))])
			if rng.IntN(3) == 0 || k == n-1 {
				c := tokens.TextOf(chunk.String())
				r.AddChunk(c.Bytes, c.Inner, c.Tokens, 0)
				chunk.Reset()
			}
		}
		reported := Usage{PromptTokens: 20, CompletionTokens: int64(n)}
		b := Bounds{PromptEstimate: 20, MaxOutput: int64(n), PromptFloor: 12}
		if got, c := BoundUsage(reported, r, b); got != reported || c != 0 || r.Tokens != int64(n) {
			t.Fatalf("case %d: %d tokens counted %d (%+v): billed %+v, corrected %q", i, n, r.Tokens, r, got, c)
		}
	}
}

// FuzzBoundUsage checks the bound's promises for any counts: never
// negative, never past the reservation, within the relayed text's
// tolerance unless that passes the reservation, unchanged (and no
// correction) when already within all of it, and each correction named
// for what it changed.
func FuzzBoundUsage(f *testing.F) {
	f.Add(int64(900), int64(300), int64(300), int64(100), int64(1200), int64(1000), int64(500), int64(0), int64(0))
	f.Add(huge, huge, int64(50), int64(0), int64(100), int64(1000), int64(500), int64(5), int64(0))
	f.Add(int64(-5), int64(-1), int64(50), int64(3), int64(100), int64(1000), int64(500), int64(900), int64(4))
	f.Add(int64(900), int64(1), int64(1), int64(3749), int64(18750), int64(1000), int64(4096), int64(0), int64(0))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0))
	f.Add(int64(1), int64(7), int64(-1), int64(0), int64(0), int64(10), int64(0), int64(2), int64(0))
	f.Fuzz(func(t *testing.T, pt, ct, chunks, words, bytes, est, maxOut, floorP, stop int64) {
		if est < 0 || maxOut < 0 || floorP < 0 || floorP > est || stop < 0 {
			t.Skip() // reservations hold no negative counts; a prompt's words never pass its estimate
		}
		// A relay's counts: at most one word a byte, a stream's size.
		var r Relayed
		if chunks >= 0 {
			r.Counted = true
			r.Chunks, r.Bytes = min(chunks, 1<<40), min(max(bytes, 0), 1<<40)
			r.Words = min(max(words, 0), r.Bytes)
			r.Tokens = max(r.Chunks, r.Words, r.Bytes/2) // any count in [floor, ceiling]
		}
		b := Bounds{PromptEstimate: est, MaxOutput: maxOut, PromptFloor: floorP, StopBytes: stop}
		in := Usage{PromptTokens: pt, CompletionTokens: ct}
		u, c := BoundUsage(in, r, b)
		if u.PromptTokens < 0 || u.CompletionTokens < 0 {
			t.Fatalf("negative result %+v", u)
		}
		if maxOut > 0 && (u.CompletionTokens > maxOut || u.PromptTokens > addSaturating(est, maxOut)-u.CompletionTokens) {
			t.Fatalf("%+v past the reservation of %d + %d", u, est, maxOut)
		}
		uncapped := maxOut == 0 || u.CompletionTokens < maxOut
		if r.Counted && uncapped && (u.CompletionTokens < r.Floor() || u.CompletionTokens > r.ceiling(b)) {
			t.Fatalf("%+v, relayed %+v: completion outside [%d, %d]", u, r, r.Floor(), r.ceiling(b))
		}
		if (c&Negative != 0) != (pt < 0 || ct < 0) {
			t.Fatalf("%+v: correction %q, negative input %v", in, c, pt < 0 || ct < 0)
		}
		if (c&(UnderReported|OverReported) != 0) != (r.Counted && (max(ct, 0) < r.Floor() || max(ct, 0) > r.ceiling(b))) {
			t.Fatalf("%+v relayed %+v: correction %q", in, r, c)
		}
		if (c&ImplausiblePrompt != 0) != (max(pt, 0) < floorP) {
			t.Fatalf("%+v, prompt floor %d: correction %q", in, floorP, c)
		}
		if c == 0 && u != in {
			t.Fatalf("%+v changed to %+v without a correction", in, u)
		}
		if c&OverReserved != 0 && maxOut == 0 {
			t.Fatalf("%+v: OverReserved without a cap", in)
		}
		within := pt >= floorP && ct >= 0 && (!r.Counted || (ct >= r.Floor() && ct <= r.ceiling(b))) &&
			(maxOut == 0 || (ct <= maxOut && pt <= addSaturating(est, maxOut)-ct))
		if within && (c != 0 || u != in) {
			t.Fatalf("%+v within every bound became %+v, %q", in, u, c)
		}
	})
}

// TestSettleBoundsReportedUsage: whatever a settle is given — by a node's
// done record, a kept settle, a caller that did not bound it — the row is
// settled within its reservation, on both dialects and on both the batch
// and the one-request path: 2^62 tokens bill the reservation's tokens and
// no more, negative counts bill as zero (the partial rule then applies),
// and the row never stays reserved.
func TestSettleBoundsReportedUsage(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		src        Source
		u          Usage
		wantStatus string
		wantUsage  Usage
		wantC      Correction
	}{
		{"huge exact usage", SourceExact, Usage{PromptTokens: huge, CompletionTokens: huge}, StatusSettled, Usage{PromptTokens: 1000, CompletionTokens: 500}, OverReserved},
		{"huge node record", SourceNodeLog, Usage{PromptTokens: huge, CompletionTokens: huge}, StatusSettled, Usage{PromptTokens: 1000, CompletionTokens: 500}, OverReserved},
		{"negative exact usage", SourceExact, Usage{PromptTokens: -1, CompletionTokens: -huge}, StatusSettled, Usage{}, Negative},
		{"negative node record", SourceNodeLog, Usage{PromptTokens: -1, CompletionTokens: -1}, StatusCancelled, Usage{}, Negative},
		{"negative prompt with output", SourcePartial, Usage{PromptTokens: -7, CompletionTokens: 40}, StatusSettled, Usage{PromptTokens: 1000, CompletionTokens: 40}, Negative},
		{"negative and huge", SourceExact, Usage{PromptTokens: -1, CompletionTokens: huge}, StatusSettled, Usage{CompletionTokens: 500}, Negative | OverReserved},
	}
	for _, batching := range []bool{true, false} {
		t.Run(map[bool]string{true: "batched", false: "one by one"}[batching], func(t *testing.T) {
			forEachDialect(t, func(t *testing.T, f *fixture) {
				f.l = f.ledger(t, Config{NoBatching: !batching})
				team := f.team(t, "a", 1_000_000)
				for i, tt := range tests {
					id := "r" + string(rune('a'+i))
					held := f.reserve(t, req(id, team)) // 1,000 prompt tokens, 500 output
					out, err := f.l.Settle(ctx, id, tt.u, tt.src)
					if err != nil {
						t.Fatalf("%s: Settle: %v", tt.name, err)
					}
					if !out.Applied || out.Status != tt.wantStatus || out.Usage != tt.wantUsage || out.Corrected != tt.wantC {
						t.Errorf("%s: %+v; want %s with %+v, corrected %q", tt.name, out, tt.wantStatus, tt.wantUsage, tt.wantC)
					}
					if out.CostMicrocredits > held.Microcredits || out.CostMicrocredits < 0 {
						t.Errorf("%s: cost %d, reservation %d", tt.name, out.CostMicrocredits, held.Microcredits)
					}
					if got := f.status(t, id); got != tt.wantStatus {
						t.Errorf("%s: row %s, want %s", tt.name, got, tt.wantStatus)
					}
				}
				if b := f.balance(t, team); b.Reserved != 0 {
					t.Errorf("team still holds %d", b.Reserved)
				}
				f.checkBooks(t)
			})
		})
	}
}

// TestSweepClosesRowsOfHostileRecords: a node's done record of 2^62 or of
// negative tokens settles its orphaned row within the reservation at the
// first sweep, instead of failing every sweep and holding the team's
// credit for good.
func TestSweepClosesRowsOfHostileRecords(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 1_000_000)
		held := f.reserve(t, req("huge", team))
		f.reserve(t, req("negative", team))
		f.log.report("huge", Usage{PromptTokens: huge, CompletionTokens: huge})
		f.log.report("negative", Usage{PromptTokens: -huge, CompletionTokens: -1})
		f.clock.Step(DefaultSweepAfter + time.Minute)
		res, err := f.l.Sweep(ctx)
		if err != nil || res.Settled+res.Cancelled != 2 {
			t.Fatalf("Sweep = %+v, %v; want both rows finished", res, err)
		}
		if got := f.status(t, "negative"); got != StatusCancelled {
			t.Errorf("negative record: row %s, want cancelled (nothing produced)", got)
		}
		if b := f.balance(t, team); b.Reserved != 0 || b.Balance != 1_000_000-held.Microcredits {
			t.Errorf("balance %+v, want the huge row billed its reservation %d and nothing held", b, held.Microcredits)
		}
		f.checkBooks(t)
	})
}
