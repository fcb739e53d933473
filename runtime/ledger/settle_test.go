package ledger

import (
	"context"
	"testing"
)

func TestReserveSettleExact(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 10_000)
		got := f.reserve(t, req("r1", team))
		if got.Existing || got.Microcredits != 500 || got.MaxOutputTokens != 500 {
			t.Fatalf("Reserve = %+v, want a new hold of 500 for 500 tokens", got)
		}
		if b := f.balance(t, team); b.Balance != 10_000 || b.Reserved != 500 || b.Available != 9_500 {
			t.Fatalf("balance after reserve = %+v, want 10000 held 500", b)
		}
		u := Usage{PromptTokens: 900, CompletionTokens: 300}
		cost := Cost(900, 300, m8bPrompt, m8bOut) // 180 + 180
		out, err := f.l.Settle(ctx, "r1", u, SourceExact)
		if err != nil {
			t.Fatalf("Settle: %v", err)
		}
		want := Outcome{RequestID: "r1", TeamID: team, Model: m8b, Status: StatusSettled, Source: SourceExact,
			Usage: u, CostMicrocredits: cost, Applied: true}
		if out != want {
			t.Fatalf("Settle = %+v, want %+v", out, want)
		}
		if b := f.balance(t, team); b.Balance != 10_000-cost || b.Reserved != 0 || b.Available != 10_000-cost {
			t.Fatalf("balance after settle = %+v, want %d and nothing held", b, 10_000-cost)
		}
		again, err := f.l.Settle(ctx, "r1", Usage{PromptTokens: 1, CompletionTokens: 1}, SourcePartial)
		if err != nil {
			t.Fatalf("second Settle: %v", err)
		}
		want.Applied = false
		if again != want {
			t.Fatalf("second Settle = %+v, want the first outcome unapplied %+v", again, want)
		}
		usage, err := f.l.Usage(ctx, team, startTime, startTime.Add(1))
		if err != nil {
			t.Fatalf("Usage: %v", err)
		}
		wantUsage := []ModelUsage{{Model: m8b, Requests: 1, PromptTokens: 900, CompletionTokens: 300, CostMicrocredits: cost}}
		if len(usage) != 1 || usage[0] != wantUsage[0] {
			t.Fatalf("Usage = %+v, want %+v", usage, wantUsage)
		}
		f.checkBooks(t)
	})
}

func TestSettleChargesAtMostTheReservation(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 10_000)
		held := f.reserve(t, req("r1", team)).Microcredits
		// The prompt estimate erred low and the engine overran max_tokens.
		u := Usage{PromptTokens: 5000, CompletionTokens: 900}
		out, err := f.l.Settle(context.Background(), "r1", u, SourceExact)
		if err != nil {
			t.Fatalf("Settle: %v", err)
		}
		if full := Cost(5000, 900, m8bPrompt, m8bOut); full <= held {
			t.Fatalf("test usage costs %d, not more than the hold %d", full, held)
		}
		// The usage recorded is what was billed: the reservation's tokens
		// (BoundUsage), not the report past them.
		bounded := Usage{PromptTokens: 1000, CompletionTokens: 500}
		if out.CostMicrocredits != held || out.Usage != bounded || !out.Capped || out.Corrected != OverReserved {
			t.Fatalf("Settle = %+v, want the hold %d charged, capped, and the reservation's usage %+v recorded", out, held, bounded)
		}
		if b := f.balance(t, team); b.Balance != 10_000-held {
			t.Fatalf("balance = %d, want %d", b.Balance, 10_000-held)
		}
		f.checkBooks(t)
	})
}

func TestPartialSettleChargesTokensSoFar(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 10_000)
		f.reserve(t, req("r1", team))
		// The client disconnected after 37 tokens.
		u := Usage{PromptTokens: 1000, CompletionTokens: 37}
		out, err := f.l.Settle(context.Background(), "r1", u, SourcePartial)
		if err != nil {
			t.Fatalf("Settle: %v", err)
		}
		cost := Cost(1000, 37, m8bPrompt, m8bOut)
		if !out.Applied || out.Source != SourcePartial || out.CostMicrocredits != cost {
			t.Fatalf("Settle = %+v, want partial, applied, cost %d", out, cost)
		}
		if b := f.balance(t, team); b.Balance != 10_000-cost || b.Reserved != 0 {
			t.Fatalf("balance = %+v, want %d with nothing held", b, 10_000-cost)
		}
		var from string
		if err := f.db.QueryRowContext(context.Background(),
			"SELECT settled_from FROM usage_ledger WHERE request_id = 'r1'").Scan(&from); err != nil || from != "partial" {
			t.Fatalf("settled_from = %q (%v), want partial", from, err)
		}
	})
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 10_000)
		f.reserve(t, req("r1", team))
		out, err := f.l.Cancel(ctx, "r1")
		if err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		if !out.Applied || out.Status != StatusCancelled || out.CostMicrocredits != 0 || out.Source != "" {
			t.Fatalf("Cancel = %+v, want applied, cancelled, free", out)
		}
		if b := f.balance(t, team); b.Balance != 10_000 || b.Reserved != 0 {
			t.Fatalf("balance = %+v, want 10000 with nothing held", b)
		}
		again, err := f.l.Cancel(ctx, "r1")
		if err != nil || again.Applied || again.Status != StatusCancelled {
			t.Fatalf("second Cancel = %+v, %v; want unapplied, cancelled", again, err)
		}
		late, err := f.l.Settle(ctx, "r1", Usage{PromptTokens: 1000, CompletionTokens: 10}, SourceExact)
		if err != nil || late.Applied || late.Status != StatusCancelled || late.CostMicrocredits != 0 {
			t.Fatalf("Settle after Cancel = %+v, %v; want the cancelled row unchanged", late, err)
		}
		if b := f.balance(t, team); b.Balance != 10_000 {
			t.Fatalf("balance = %d after a late settle, want 10000", b.Balance)
		}
		f.checkBooks(t)
	})
}

func TestFinishRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 10_000)
		f.reserve(t, req("r1", team))
		tests := []struct {
			name   string
			call   func() error
			target error
		}{
			{name: "unknown settle", target: ErrNotFound, call: func() error {
				_, err := f.l.Settle(ctx, "nope", Usage{}, SourceExact)
				return err
			}},
			{name: "unknown cancel", target: ErrNotFound, call: func() error {
				_, err := f.l.Cancel(ctx, "nope")
				return err
			}},
			{name: "unknown source", target: ErrInvalidInput, call: func() error {
				_, err := f.l.Settle(ctx, "r1", Usage{}, Source("guess"))
				return err
			}},
			{name: "empty id", target: ErrInvalidInput, call: func() error {
				_, err := f.l.Cancel(ctx, "")
				return err
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				wantErr(t, tt.name, tt.call(), tt.target)
			})
		}
		if got := f.status(t, "r1"); got != StatusReserved {
			t.Fatalf("row is %s after refused calls, want reserved", got)
		}
		f.checkBooks(t)
	})
}

func TestSettleBillsReservedPrices(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 10_000)
		f.reserve(t, req("r1", team))
		// The admin raises the price while the request runs.
		if _, err := f.db.ExecContext(context.Background(),
			"UPDATE models SET completion_price_micro_per_mtok = completion_price_micro_per_mtok * 10 WHERE name = $1", m8b); err != nil {
			t.Fatal(err)
		}
		out, err := f.l.Settle(context.Background(), "r1", Usage{PromptTokens: 1000, CompletionTokens: 100}, SourceExact)
		if err != nil {
			t.Fatalf("Settle: %v", err)
		}
		if want := Cost(1000, 100, m8bPrompt, m8bOut); out.CostMicrocredits != want {
			t.Fatalf("cost = %d, want %d at the prices of the reservation", out.CostMicrocredits, want)
		}
	})
}

func TestSettleMayOverdrawAfterACorrection(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 1_000)
		f.reserve(t, req("r1", team)) // holds 500
		if _, err := f.l.AddCredit(ctx, team, "fix-1", -900, "granted by mistake"); err != nil {
			t.Fatalf("correction: %v", err)
		}
		if b := f.balance(t, team); b.Balance != 100 || b.Available != -400 {
			t.Fatalf("balance after correction = %+v, want 100, available -400", b)
		}
		_, err := f.l.Reserve(ctx, req("r2", team))
		wantErr(t, "Reserve while short", err, ErrInsufficientBalance)
		out, err := f.l.Settle(ctx, "r1", Usage{PromptTokens: 1000, CompletionTokens: 500}, SourceExact)
		if err != nil {
			t.Fatalf("Settle: %v", err)
		}
		if !out.Applied || !out.Overdrawn || out.CostMicrocredits != 500 {
			t.Fatalf("Settle = %+v, want the full 500 charged and the overdraft reported", out)
		}
		if b := f.balance(t, team); b.Balance != -400 || b.Reserved != 0 {
			t.Fatalf("balance = %+v, want -400 carried as debt", b)
		}
		_, err = f.l.Reserve(ctx, Reservation{RequestID: "r3", TeamID: team, Model: m8b, PromptTokens: 10})
		wantErr(t, "Reserve in debt", err, ErrInsufficientBalance)
		f.checkBooks(t)
	})
}
