package ledger

import (
	"context"
	"os"
	"path/filepath"
	"slices"
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
			// The ledger of today settles on today's schema.
			later, err := filepath.Glob(filepath.Join(dir, "*.sql"))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range later {
				if filepath.Base(f) > "0002_~" {
					exec(readFile(t, f))
				}
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

// TestMigration0009RekeysTheRollup applies the migrations up to 0008,
// settles rows through two keys and none as a binary of then would, then
// applies 0009: usage_daily is rebuilt per key (UsageByKey equals the
// ledger's GROUP BY) and latency_hourly counts the settled rows, untimed.
func TestMigration0009RekeysTheRollup(t *testing.T) {
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
			files, err := filepath.Glob(filepath.Join(dir, "000[1-8]_*.sql"))
			if err != nil || len(files) != 8 {
				t.Fatalf("migrations 0001-0008: %v, %v", files, err)
			}
			for _, f := range files {
				exec(readFile(t, f))
			}
			exec(`INSERT INTO models (name, served_name, prompt_price_micro_per_mtok, completion_price_micro_per_mtok,
				max_context_tokens, max_output_tokens) VALUES ('m8b', 'm8b', 200000, 600000, 8192, 4096)`)
			exec("INSERT INTO teams (id, name, balance_microcredits) VALUES (1, 'a', 10000)")
			exec(`INSERT INTO api_keys (id, team_id, name, prefix, hash) VALUES (7, 1, 'k7', 'k7', $1), (8, 1, 'k8', 'k8', $2)`,
				[]byte("h7"), []byte("h8"))
			exec(`INSERT INTO usage_ledger (request_id, team_id, key_id, model, prompt_tokens, completion_tokens,
				reserved_microcredits, cost_microcredits, status, settled_from, settled_at, created_at)
				VALUES ('s1', 1, 7, 'm8b', 10, 1, 9, 5, 'settled', 'exact', $1, $1), ('s2', 1, 8, 'm8b', 20, 2, 9, 6, 'settled', 'exact', $1, $1),
				       ('s3', 1, NULL, 'm8b', 30, 3, 9, 7, 'settled', 'exact', $2, $2), ('s4', 1, 7, 'm8b', 40, 4, 9, 8, 'settled', 'exact', $2, $2)`,
				startTime, startTime.Add(day))
			exec(readFile(t, filepath.Join(dir, "0009_usage_by_key_latency.sql")))
			f := &fixture{db: db, clock: testingclock.NewFakeClock(startTime)}
			f.l = f.ledger(t, Config{})
			from, to := startTime.Truncate(day), startTime.Add(2*day)
			got, err := f.l.UsageByKey(ctx, 1, from, to)
			want := directByKey(t, f, 1, from, to)
			if err != nil || !slices.Equal(got, want) || len(got) != 3 {
				t.Fatalf("UsageByKey after 0009 = %+v, %v; the ledger says %+v", got, err, want)
			}
			lat, err := f.l.TeamLatency(ctx, 1, from, to, ByKeyAndModel)
			if err != nil || !slices.Equal(lat, directLatency(t, f, 1, from, to, ByKeyAndModel)) || len(lat) != 3 || lat[1].Requests != 2 || lat[1].Timed != 0 {
				t.Fatalf("TeamLatency after 0009 = %+v, %v; want the settled rows counted per key, untimed", lat, err)
			}
		})
	}
}
