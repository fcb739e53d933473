package ledger

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/store"
)

// TestMigrationBackfillsOpenReservations applies 0001, leaves reservations
// open as a binary without this ledger would, then applies 0002 and checks
// that the teams' held amounts and the rows' prices were filled in.
func TestMigrationBackfillsOpenReservations(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialects {
		t.Run(dc.name, func(t *testing.T) {
			dir := filepath.Join("..", "store", "migrations", dc.name)
			db, err := store.Open(ctx, dc.dsn(t))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer db.Close()
			exec := func(sql string, args ...any) {
				t.Helper()
				if _, err := db.ExecContext(ctx, sql, args...); err != nil {
					t.Fatalf("%.60s…: %v", sql, err)
				}
			}
			exec(readFile(t, filepath.Join(dir, "0001_init.sql")))
			exec(`INSERT INTO models (name, served_name, prompt_price_micro_per_mtok, completion_price_micro_per_mtok,
				max_context_tokens, max_output_tokens) VALUES ('m8b', 'm8b', 200000, 600000, 8192, 4096)`)
			exec("INSERT INTO teams (id, name, balance_microcredits) VALUES (1, 'a', 10000), (2, 'b', 10000)")
			exec(`INSERT INTO usage_ledger (request_id, team_id, model, reserved_microcredits, status, settled_from, settled_at, created_at)
				VALUES ('open-1', 1, 'm8b', 300, 'reserved', NULL, NULL, $1), ('open-2', 1, 'm8b', 200, 'reserved', NULL, NULL, $1),
				       ('done-1', 1, 'm8b', 900, 'settled', 'exact', $1, $1), ('open-3', 2, 'm8b', 50, 'reserved', NULL, NULL, $1)`,
				startTime)
			exec(readFile(t, filepath.Join(dir, "0002_ledger.sql")))
			var a, b int64
			if err := db.QueryRowContext(ctx, "SELECT (SELECT reserved_microcredits FROM teams WHERE id = 1), (SELECT reserved_microcredits FROM teams WHERE id = 2)").Scan(&a, &b); err != nil {
				t.Fatal(err)
			}
			if a != 500 || b != 50 {
				t.Fatalf("reserved after backfill = %d, %d; want 500, 50", a, b)
			}
			f := &fixture{db: db, clock: testingclock.NewFakeClock(startTime)}
			f.l = f.ledger(t, Config{})
			out, err := f.l.Settle(ctx, "open-1", Usage{PromptTokens: 1000, CompletionTokens: 100}, SourceExact)
			if want := Cost(1000, 100, 200_000, 600_000); err != nil || out.CostMicrocredits != want {
				t.Fatalf("settling a backfilled row = %+v, %v; want cost %d at the model's prices", out, err, want)
			}
			if got := f.balance(t, 1); got.Balance != 10_000-out.CostMicrocredits || got.Reserved != 200 {
				t.Fatalf("team a = %+v, want %d with open-2's 200 held", got, 10_000-out.CostMicrocredits)
			}
		})
	}
}

// readFile returns the contents of path.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
