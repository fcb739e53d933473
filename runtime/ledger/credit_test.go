package ledger

import (
	"context"
	"testing"
)

func TestAddCredit(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		a := f.team(t, "a", 0)
		b := f.team(t, "b", 0)
		first, err := f.l.AddCredit(ctx, a, "grant-1", 5_000, "welcome")
		if err != nil {
			t.Fatalf("AddCredit: %v", err)
		}
		if !first.Applied || first.ID == 0 || first.TeamID != a || first.Amount != 5_000 || first.Note != "welcome" ||
			!first.CreatedAt.Equal(startTime) {
			t.Fatalf("AddCredit = %+v, want an applied entry of 5000 for team %d at %v", first, a, startTime)
		}
		retry, err := f.l.AddCredit(ctx, a, "grant-1", 5_000, "retried")
		want := first
		want.Applied = false
		if err != nil || retry != want {
			t.Fatalf("retried AddCredit = %+v, %v; want %+v", retry, err, want)
		}
		_, err = f.l.AddCredit(ctx, a, "grant-1", 6_000, "")
		wantErr(t, "same key, other amount", err, ErrIdempotencyConflict)
		_, err = f.l.AddCredit(ctx, b, "grant-1", 5_000, "")
		wantErr(t, "same key, other team", err, ErrIdempotencyConflict)
		if got := f.balance(t, a).Balance; got != 5_000 {
			t.Fatalf("balance of a = %d after retries and conflicts, want 5000", got)
		}
		if got := f.balance(t, b).Balance; got != 0 {
			t.Fatalf("balance of b = %d, want 0", got)
		}
		fix, err := f.l.AddCredit(ctx, a, "fix-1", -7_000, "correction")
		if err != nil || !fix.Applied {
			t.Fatalf("negative correction = %+v, %v; want applied", fix, err)
		}
		if got := f.balance(t, a); got.Balance != -2_000 || got.Available != -2_000 {
			t.Fatalf("balance after correction = %+v, want -2000", got)
		}
		f.checkBooks(t)
	})
}

func TestAddCreditRefusesBadInput(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 0)
		tests := []struct {
			name   string
			team   int64
			key    string
			amount int64
			target error
		}{
			{name: "zero amount", team: team, key: "k1", target: ErrInvalidInput},
			{name: "empty key", team: team, amount: 1, target: ErrInvalidInput},
			{name: "absurd amount", team: team, key: "k2", amount: maxCreditAmount + 1, target: ErrInvalidInput},
			{name: "unknown team", team: team + 100, key: "k3", amount: 1, target: ErrUnknownTeam},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := f.l.AddCredit(context.Background(), tt.team, tt.key, tt.amount, "")
				wantErr(t, "AddCredit", err, tt.target)
			})
		}
		var entries int
		if err := f.db.QueryRow("SELECT COUNT(*) FROM credit_entries").Scan(&entries); err != nil || entries != 0 {
			t.Fatalf("%d credit entries (%v) after refused calls, want 0", entries, err)
		}
	})
}

// TestCreditCannotOverflowABalance: grants that each pass the per-grant
// bound cannot, together, take a balance past MaxBalance (which would
// overflow bigint on PostgreSQL and turn SQLite's balance into a float);
// the refused grant records nothing, and the balance stays an integer.
func TestCreditCannotOverflowABalance(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 0)
		ctx := context.Background()
		grants := int64(MaxBalance / maxCreditAmount)
		// Start one grant short of the bound in one statement, as thousands
		// of grants would.
		if _, err := f.db.Exec("UPDATE teams SET balance_microcredits = $1 WHERE id = $2",
			(grants-1)*maxCreditAmount, team); err != nil {
			t.Fatal(err)
		}
		if _, err := f.l.AddCredit(ctx, team, "last-fits", maxCreditAmount, ""); err != nil {
			t.Fatalf("the grant that reaches MaxBalance exactly: %v", err)
		}
		_, err := f.l.AddCredit(ctx, team, "one-too-many", 1, "")
		wantErr(t, "AddCredit past MaxBalance", err, ErrBalanceOutOfRange)
		var balance any
		if err := f.db.QueryRow("SELECT balance_microcredits FROM teams WHERE id = $1", team).Scan(&balance); err != nil {
			t.Fatal(err)
		}
		if b, ok := balance.(int64); !ok || b != MaxBalance {
			t.Fatalf("balance = %v (%T), want the integer %d", balance, balance, int64(MaxBalance))
		}
		var entries int
		if err := f.db.QueryRow("SELECT COUNT(*) FROM credit_entries WHERE idempotency_key = 'one-too-many'").Scan(&entries); err != nil || entries != 0 {
			t.Fatalf("%d entries (%v) for the refused grant, want 0", entries, err)
		}
		// A correction back down is still allowed, and so is the far side.
		if _, err := f.l.AddCredit(ctx, team, "down", -maxCreditAmount, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := f.db.Exec("UPDATE teams SET balance_microcredits = $1 WHERE id = $2", int64(-MaxBalance), team); err != nil {
			t.Fatal(err)
		}
		_, err = f.l.AddCredit(ctx, team, "below", -1, "")
		wantErr(t, "AddCredit past -MaxBalance", err, ErrBalanceOutOfRange)
	})
}

func TestConcurrentAddCreditOfOneKey(t *testing.T) {
	const callers = 20
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 0)
		outs := make([]Credit, callers)
		errs := make([]error, callers)
		runTogether(callers, func(i int) {
			outs[i], errs[i] = f.l.AddCredit(context.Background(), team, "once", 1_000, "")
		})
		applied := 0
		for i := range callers {
			if errs[i] != nil {
				t.Fatalf("caller %d: %v", i, errs[i])
			}
			if outs[i].Applied {
				applied++
			}
			if outs[i].ID != outs[0].ID {
				t.Fatalf("callers saw entries %d and %d", outs[0].ID, outs[i].ID)
			}
		}
		if applied != 1 || f.balance(t, team).Balance != 1_000 {
			t.Fatalf("%d callers applied, balance %d; want one grant of 1000", applied, f.balance(t, team).Balance)
		}
		f.checkBooks(t)
	})
}
