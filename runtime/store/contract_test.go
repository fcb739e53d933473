package store

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/schema.golden from PostgreSQL")

// requiredTables are the tables the design names; the golden file must hold
// every one of them.
var requiredTables = []string{
	"teams", "models", "api_keys", "usage_ledger", "credit_entries",
	"nodes", "node_tokens", "node_events", "schema_migrations",
}

func TestMigrateIsIdempotent(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := openTest(t, dc.dsn(t))
			migs := embeddedMigrations(t, db.Dialect())
			first, err := db.migrate(ctx, migs)
			if err != nil {
				t.Fatalf("first migrate: %v", err)
			}
			second, err := db.migrate(ctx, migs)
			if err != nil {
				t.Fatalf("second migrate: %v", err)
			}
			if first != len(migs) || second != 0 {
				t.Errorf("applied %d then %d, want %d then 0", first, second, len(migs))
			}
			if err := db.Migrate(ctx); err != nil {
				t.Fatalf("Migrate on a current schema: %v", err)
			}
			var rows, latest int64
			err = db.QueryRowContext(ctx, "SELECT count(*), max(version) FROM schema_migrations").Scan(&rows, &latest)
			if err != nil {
				t.Fatalf("read schema_migrations: %v", err)
			}
			if rows != int64(len(migs)) || latest != migs[len(migs)-1].version {
				t.Errorf("schema_migrations has %d rows up to %d, want %d up to %d", rows, latest, len(migs), migs[len(migs)-1].version)
			}
		})
	}
}

func TestSchemaMatchesGolden(t *testing.T) {
	golden := filepath.Join("testdata", "schema.golden")
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			got := describeSchema(t, migrated(t, dc.dsn(t)))
			if *update && dc.name == "postgres" {
				if err := os.WriteFile(golden, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update to create it): %v", err)
			}
			want := strings.Split(strings.TrimSpace(string(b)), "\n")
			if d := diffLines(got, want); d != "" {
				t.Errorf("%s schema differs from %s (+ only in %s, - only in golden):\n%s", dc.name, golden, dc.name, d)
			}
			for _, table := range requiredTables {
				if !strings.Contains(string(b), "column "+table+".") {
					t.Errorf("golden schema has no table %s", table)
				}
			}
		})
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := migrated(t, dc.dsn(t))
			migs := embeddedMigrations(t, db.Dialect())
			future := migs[len(migs)-1].version + 1
			if _, err := db.ExecContext(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", future); err != nil {
				t.Fatalf("record a future version: %v", err)
			}
			err := db.Migrate(ctx)
			if !errors.Is(err, ErrSchemaTooNew) {
				t.Fatalf("Migrate error = %v, want ErrSchemaTooNew", err)
			}
			for _, want := range []string{strconv.FormatInt(future, 10), strconv.FormatInt(future-1, 10)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name version %s", err, want)
				}
			}
		})
	}
}

func TestMigrationIsAtomic(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := openTest(t, dc.dsn(t))
			migs := embeddedMigrations(t, db.Dialect())
			last := migs[len(migs)-1].version
			broken := migration{version: last + 1, name: "broken.sql",
				sql: "CREATE TABLE half_done (id INTEGER); INSERT INTO no_such_table VALUES (1);"}
			applied, err := db.migrate(ctx, append(migs, broken))
			if err == nil || !strings.Contains(err.Error(), "broken.sql") {
				t.Fatalf("migrate error = %v, want one naming broken.sql", err)
			}
			if applied != len(migs) {
				t.Errorf("applied %d migrations, want the %d good ones", applied, len(migs))
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM half_done").Scan(&n); err == nil {
				t.Errorf("table of the failed migration exists")
			}
			var latest int64
			if err := db.QueryRowContext(ctx, "SELECT max(version) FROM schema_migrations").Scan(&latest); err != nil {
				t.Fatalf("read version: %v", err)
			}
			if latest != last {
				t.Errorf("version = %d, want %d", latest, last)
			}
		})
	}
}

func TestConcurrentMigrate(t *testing.T) {
	const replicas = 6 // several replicas starting at once, each with its own pool
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			dsn := dc.dsn(t)
			dbs := make([]*DB, replicas)
			for i := range dbs {
				dbs[i] = openTest(t, dsn)
			}
			migs := embeddedMigrations(t, dbs[0].Dialect())
			applied := make([]int, replicas)
			errs := make([]error, replicas)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, db := range dbs {
				wg.Go(func() {
					<-start
					applied[i], errs[i] = db.migrate(ctx, migs)
				})
			}
			close(start)
			wg.Wait()
			total := 0
			for i := range dbs {
				if errs[i] != nil {
					t.Errorf("replica %d: %v", i, errs[i])
				}
				total += applied[i]
			}
			if total != len(migs) {
				t.Errorf("replicas applied %v migrations in all (%d), want each of the %d once", applied, total, len(migs))
			}
		})
	}
}
