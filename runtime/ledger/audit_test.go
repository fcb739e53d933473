package ledger

import (
	"context"
	"strings"
	"testing"
)

// TestAuditFindsDrift: the audit counts the rows, passes books that
// balance, and names a team whose stored balance or reserved amount drifted
// from its rows.
func TestAuditFindsDrift(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		team := f.team(t, "a", 1_000_000)
		f.reserve(t, req("r1", team))
		f.reserve(t, req("r2", team))
		if _, err := f.l.Settle(ctx, "r1", Usage{PromptTokens: 1000, CompletionTokens: 100}, SourceExact); err != nil {
			t.Fatal(err)
		}
		b, err := f.l.Audit(ctx)
		if err != nil || b.Teams != 1 || b.Reserved != 1 || b.Settled != 1 || b.CompletionTokens != 100 {
			t.Fatalf("Audit = %+v, %v; want 1 team, 1 reserved, 1 settled with 100 completion tokens, no error", b, err)
		}
		if _, err := f.db.ExecContext(ctx, "UPDATE teams SET balance_microcredits = balance_microcredits + 1, reserved_microcredits = 0 WHERE id = $1", team); err != nil {
			t.Fatal(err)
		}
		_, err = f.l.Audit(ctx)
		if err == nil || !strings.Contains(err.Error(), "balance") || !strings.Contains(err.Error(), "reserved 0") {
			t.Fatalf("Audit after the drift = %v; want both the balance and the reserved amount named", err)
		}
	})
}
