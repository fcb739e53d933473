package ledger

import (
	"context"
	"math"
	"testing"
	"time"
)

func TestUsageIsScopedByTeam(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		a := f.team(t, "a", 1_000_000)
		b := f.team(t, "b", 1_000_000)
		settle := func(id string, team int64, model string, u Usage) {
			t.Helper()
			f.reserve(t, Reservation{RequestID: id, TeamID: team, Model: model, PromptTokens: 1000, MaxOutputTokens: 100})
			if _, err := f.l.Settle(ctx, id, u, SourceExact); err != nil {
				t.Fatal(err)
			}
		}
		settle("a1", a, m8b, Usage{PromptTokens: 100, CompletionTokens: 10})
		settle("a2", a, m8b, Usage{PromptTokens: 200, CompletionTokens: 20})
		settle("a3", a, m70b, Usage{PromptTokens: 300, CompletionTokens: 30})
		f.reserve(t, Reservation{RequestID: "a-open", TeamID: a, Model: m8b, PromptTokens: 5})
		f.reserve(t, Reservation{RequestID: "a-gone", TeamID: a, Model: m8b, PromptTokens: 5})
		if _, err := f.l.Cancel(ctx, "a-gone"); err != nil {
			t.Fatal(err)
		}
		from, to := startTime, startTime.Add(time.Hour)
		got, err := f.l.Usage(ctx, b, from, to)
		if err != nil || len(got) != 0 {
			t.Fatalf("Usage(b) = %+v, %v; want nothing of team a", got, err)
		}
		settle("b1", b, m8b, Usage{PromptTokens: 7, CompletionTokens: 3})
		got, err = f.l.Usage(ctx, b, from, to)
		wantB := ModelUsage{Model: m8b, Requests: 1, PromptTokens: 7, CompletionTokens: 3, CostMicrocredits: Cost(7, 3, m8bPrompt, m8bOut)}
		if err != nil || len(got) != 1 || got[0] != wantB {
			t.Fatalf("Usage(b) = %+v, %v; want only %+v", got, err, wantB)
		}
		got, err = f.l.Usage(ctx, a, from, to)
		wantA := []ModelUsage{
			{Model: m70b, Requests: 1, PromptTokens: 300, CompletionTokens: 30, CostMicrocredits: Cost(300, 30, 900_000, 2_700_000)},
			{Model: m8b, Requests: 2, PromptTokens: 300, CompletionTokens: 30,
				CostMicrocredits: Cost(100, 10, m8bPrompt, m8bOut) + Cost(200, 20, m8bPrompt, m8bOut)},
		}
		if err != nil || len(got) != len(wantA) || got[0] != wantA[0] || got[1] != wantA[1] {
			t.Fatalf("Usage(a) = %+v, %v; want %+v (settled rows only, sorted by model)", got, err, wantA)
		}
	})
}

func TestUsageWindowIsHalfOpen(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 1_000_000)
		for i, id := range []string{"h0", "h1", "h2"} {
			if i > 0 {
				f.clock.Step(time.Hour)
			}
			f.reserve(t, req(id, team))
			if _, err := f.l.Settle(ctx, id, Usage{PromptTokens: 1, CompletionTokens: 1}, SourceExact); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			name     string
			from, to time.Time
			want     int64
		}{
			{name: "first two hours", from: startTime, to: startTime.Add(2 * time.Hour), want: 2},
			{name: "all", from: startTime, to: startTime.Add(2*time.Hour + time.Nanosecond), want: 3},
			{name: "from just after the first", from: startTime.Add(time.Nanosecond), to: startTime.Add(3 * time.Hour), want: 2},
			{name: "empty window", from: startTime.Add(time.Hour), to: startTime.Add(time.Hour), want: 0},
			{name: "before", from: startTime.Add(-time.Hour), to: startTime, want: 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := f.l.Usage(ctx, team, tt.from, tt.to)
				if err != nil {
					t.Fatalf("Usage: %v", err)
				}
				var n int64
				for _, u := range got {
					n += u.Requests
				}
				if n != tt.want {
					t.Fatalf("Usage counted %d requests, want %d", n, tt.want)
				}
			})
		}
	})
}

func TestBalanceOfUnknownTeam(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		_, err := f.l.Balance(context.Background(), 12345)
		wantErr(t, "Balance", err, ErrUnknownTeam)
	})
}

// TestUsageSumsNeverOverflow: rows written before settles bounded their
// counts (2^62 tokens each) sum to at most the largest int64 in the usage
// report, on both dialects, instead of failing the team's query for good.
func TestUsageSumsNeverOverflow(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 1_000_000)
		for _, id := range []string{"a", "b", "c"} {
			f.reserve(t, req(id, team))
			if _, err := f.l.Settle(ctx, id, Usage{PromptTokens: 10, CompletionTokens: 10}, SourceExact); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.db.ExecContext(ctx, `UPDATE usage_ledger SET prompt_tokens = $1, completion_tokens = $1,
			cost_microcredits = $1 WHERE team_id = $2`, int64(1)<<62, team); err != nil {
			t.Fatal(err)
		}
		got, err := f.l.Usage(ctx, team, startTime, startTime.Add(1))
		if err != nil {
			t.Fatalf("Usage: %v", err)
		}
		want := ModelUsage{Model: m8b, Requests: 3, PromptTokens: math.MaxInt64, CompletionTokens: math.MaxInt64, CostMicrocredits: math.MaxInt64}
		if len(got) != 1 || got[0] != want {
			t.Errorf("Usage = %+v, want %+v", got, want)
		}
	})
}
