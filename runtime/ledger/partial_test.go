package ledger

import (
	"context"
	"testing"
)

// TestPartialRule: a partial or node-log settle follows one rule on both
// dialects, whoever sends it — the gateway or the sweeper from a node's
// done record: nothing produced cancels the row; output without a prompt
// count bills the prompt at the reservation's estimate.
func TestPartialRule(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		src        Source
		u          Usage
		wantStatus string
		wantUsage  Usage
	}{
		{"node record of an abort without usage", SourceNodeLog, Usage{CompletionTokens: 40}, StatusSettled, Usage{PromptTokens: 1000, CompletionTokens: 40}},
		{"node record of nothing", SourceNodeLog, Usage{}, StatusCancelled, Usage{}},
		{"node record with usage", SourceNodeLog, Usage{PromptTokens: 900, CompletionTokens: 40}, StatusSettled, Usage{PromptTokens: 900, CompletionTokens: 40}},
		{"gateway partial without usage", SourcePartial, Usage{CompletionTokens: 7}, StatusSettled, Usage{PromptTokens: 1000, CompletionTokens: 7}},
		{"gateway partial of nothing", SourcePartial, Usage{}, StatusCancelled, Usage{}},
		{"exact usage is never changed", SourceExact, Usage{PromptTokens: 3, CompletionTokens: 0}, StatusSettled, Usage{PromptTokens: 3}},
	}
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 1_000_000)
		for i, tt := range tests {
			id := "r" + string(rune('a'+i))
			f.reserve(t, req(id, team)) // a prompt estimate of 1,000
			out, err := f.l.Settle(ctx, id, tt.u, tt.src)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if out.Status != tt.wantStatus || out.Usage != tt.wantUsage || !out.Applied {
				t.Errorf("%s: %+v, want %s with %+v", tt.name, out, tt.wantStatus, tt.wantUsage)
			}
			if tt.wantStatus == StatusCancelled && out.CostMicrocredits != 0 {
				t.Errorf("%s: a cancelled row cost %d", tt.name, out.CostMicrocredits)
			}
		}
		if b := f.balance(t, team); b.Reserved != 0 {
			t.Errorf("team still holds %d", b.Reserved)
		}
		f.checkBooks(t)
	})
}
