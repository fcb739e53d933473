package ledger

import (
	"context"
	"math"
	"testing"
	"time"
)

// huge is the count a hostile node reported in issue 29: 2^62 tokens.
const huge = int64(1) << 62

func TestBoundUsage(t *testing.T) {
	b := Bounds{PromptEstimate: 1000, MaxOutput: 500}
	tests := []struct {
		name     string
		reported Usage
		relayed  int64
		bounds   Bounds
		want     Usage
		wantC    Correction
	}{
		{"within the reservation", Usage{PromptTokens: 900, CompletionTokens: 300}, 300, b, Usage{PromptTokens: 900, CompletionTokens: 300}, 0},
		{"more reported than relayed", Usage{PromptTokens: 900, CompletionTokens: 300}, 10, b, Usage{PromptTokens: 900, CompletionTokens: 300}, 0},
		{"fewer reported than relayed", Usage{PromptTokens: 900, CompletionTokens: 1}, 50, b, Usage{PromptTokens: 900, CompletionTokens: 50}, UnderReported},
		{"huge counts", Usage{PromptTokens: huge, CompletionTokens: huge}, 50, b, Usage{PromptTokens: 1000, CompletionTokens: 500}, OverReserved},
		{"largest counts", Usage{PromptTokens: math.MaxInt64, CompletionTokens: math.MaxInt64}, 0, Bounds{PromptEstimate: math.MaxInt64, MaxOutput: math.MaxInt64},
			Usage{PromptTokens: 0, CompletionTokens: math.MaxInt64}, OverReserved},
		{"a prompt past the estimate that fits the output left", Usage{PromptTokens: 1200, CompletionTokens: 100}, 100, b, Usage{PromptTokens: 1200, CompletionTokens: 100}, 0},
		{"a prompt past estimate and output", Usage{PromptTokens: 1200, CompletionTokens: 400}, 400, b, Usage{PromptTokens: 1100, CompletionTokens: 400}, OverReserved},
		{"negative counts", Usage{PromptTokens: -5, CompletionTokens: -huge}, 0, b, Usage{}, Negative},
		{"negative completion, chunks relayed", Usage{PromptTokens: 900, CompletionTokens: -1}, 50, b, Usage{PromptTokens: 900, CompletionTokens: 50}, Negative | UnderReported},
		{"relayed past the cap", Usage{PromptTokens: 900, CompletionTokens: 1}, 501, b, Usage{PromptTokens: 900, CompletionTokens: 500}, UnderReported | OverReserved},
		{"no cap known: no ceiling", Usage{PromptTokens: huge, CompletionTokens: huge}, 0, Bounds{PromptEstimate: 1000}, Usage{PromptTokens: huge, CompletionTokens: huge}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, c := BoundUsage(tt.reported, tt.relayed, tt.bounds)
			if got != tt.want || c != tt.wantC {
				t.Errorf("BoundUsage(%+v, %d, %+v) = %+v, %q; want %+v, %q", tt.reported, tt.relayed, tt.bounds, got, c, tt.want, tt.wantC)
			}
		})
	}
}

func TestCorrectionReasons(t *testing.T) {
	if got := (UnderReported | OverReserved | Negative).String(); got != "under_reported,over_reserved,negative" {
		t.Errorf("String = %q", got)
	}
	if got := Correction(0).Reasons(); len(got) != 0 {
		t.Errorf("Reasons of none = %v", got)
	}
}

// FuzzBoundUsage checks the bound's promises for any counts: never
// negative, at least what was relayed unless that passes the reservation,
// never past the reservation, unchanged (and no correction) when already
// within all of it, and each correction named for what it changed.
func FuzzBoundUsage(f *testing.F) {
	f.Add(int64(900), int64(300), int64(300), int64(1000), int64(500))
	f.Add(huge, huge, int64(50), int64(1000), int64(500))
	f.Add(int64(-5), int64(-1), int64(50), int64(1000), int64(500))
	f.Add(int64(900), int64(1), int64(50), int64(1000), int64(500))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, pt, ct, relayed, est, maxOut int64) {
		if est < 0 || maxOut < 0 {
			t.Skip() // reservations hold no negative counts (Reservation.validate, the schema's checks)
		}
		in := Usage{PromptTokens: pt, CompletionTokens: ct}
		u, c := BoundUsage(in, relayed, Bounds{PromptEstimate: est, MaxOutput: maxOut})
		if u.PromptTokens < 0 || u.CompletionTokens < 0 {
			t.Fatalf("negative result %+v", u)
		}
		if maxOut > 0 {
			if u.CompletionTokens > maxOut || u.PromptTokens > addSaturating(est, maxOut)-u.CompletionTokens {
				t.Fatalf("%+v past the reservation of %d + %d", u, est, maxOut)
			}
			if u.CompletionTokens < min(max(relayed, 0), maxOut) {
				t.Fatalf("%+v bills less than the %d relayed", u, relayed)
			}
		} else if u.CompletionTokens < relayed {
			t.Fatalf("%+v bills less than the %d relayed", u, relayed)
		}
		if (c&Negative != 0) != (pt < 0 || ct < 0) {
			t.Fatalf("%+v: correction %q, negative input %v", in, c, pt < 0 || ct < 0)
		}
		if (c&UnderReported != 0) != (relayed > max(ct, 0)) {
			t.Fatalf("%+v relayed %d: correction %q", in, relayed, c)
		}
		if c == 0 && u != in {
			t.Fatalf("%+v changed to %+v without a correction", in, u)
		}
		if c&OverReserved != 0 && maxOut == 0 {
			t.Fatalf("%+v: OverReserved without a cap", in)
		}
		within := pt >= 0 && ct >= 0 && relayed <= ct &&
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
