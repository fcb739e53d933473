package testenv

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"
	"time"
)

// openPG opens dsn and closes it when the test ends.
func openPG(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestPostgresDatabaseIsReachable(t *testing.T) {
	dsn := Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN %q: %v", dsn, err)
	}
	if u.Scheme != "postgres" {
		t.Errorf("DSN scheme = %q, want postgres", u.Scheme)
	}
	var got string
	if err := openPG(t, dsn).QueryRowContext(context.Background(), "SELECT current_database()").Scan(&got); err != nil {
		t.Fatalf("query current database: %v", err)
	}
	if want := strings.TrimPrefix(u.Path, "/"); got != want {
		t.Errorf("current_database() = %q, want %q", got, want)
	}
}

func TestPostgresDatabasesAreIsolated(t *testing.T) {
	ctx := context.Background()
	var firstName string
	t.Run("creates a table", func(t *testing.T) {
		dsn := Postgres(t)
		db := openPG(t, dsn)
		if _, err := db.ExecContext(ctx, "CREATE TABLE only_here (id int)"); err != nil {
			t.Fatalf("create table: %v", err)
		}
		if err := db.QueryRowContext(ctx, "SELECT current_database()").Scan(&firstName); err != nil {
			t.Fatalf("query current database: %v", err)
		}
	})
	t.Run("does not see it", func(t *testing.T) {
		db := openPG(t, Postgres(t))
		var got bool
		err := db.QueryRowContext(ctx, "SELECT to_regclass('only_here') IS NOT NULL").Scan(&got)
		if err != nil {
			t.Fatalf("look up table: %v", err)
		}
		if got {
			t.Errorf("table created in another test's database is visible")
		}
	})
	t.Run("first database was dropped", func(t *testing.T) {
		if firstName == "" {
			t.Fatal("first subtest did not record its database")
		}
		var got int
		err := fast.srv.admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", firstName).Scan(&got)
		if err != nil {
			t.Fatalf("look up database: %v", err)
		}
		if got != 0 {
			t.Errorf("database %s still exists after its test ended", firstName)
		}
	})
}

func TestDatabaseName(t *testing.T) {
	tests := []struct {
		name     string
		testName string
		prefix   string
	}{
		{name: "plain", testName: "TestX", prefix: "t_testx_"},
		{name: "subtest", testName: "TestX/a b-c", prefix: "t_testx_a_b_c_"},
		{name: "long", testName: strings.Repeat("A", 100), prefix: "t_" + strings.Repeat("a", databaseNameStem) + "_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := databaseName(tt.testName)
			if !strings.HasPrefix(got, tt.prefix) || len(got) != len(tt.prefix)+8 {
				t.Errorf("databaseName(%q) = %q, want %q followed by 8 hex digits", tt.testName, got, tt.prefix)
			}
			if len(got) > 63 {
				t.Errorf("databaseName(%q) is %d bytes, PostgreSQL keeps 63", tt.testName, len(got))
			}
		})
	}
}

// BenchmarkPostgresDatabase measures creating and dropping one test
// database, the cost every Postgres call adds to a test.
func BenchmarkPostgresDatabase(b *testing.B) {
	Postgres(b) // starts the server outside the timed loop
	srv := fast.srv
	var create, drop time.Duration
	for b.Loop() {
		name := databaseName("bench")
		start := time.Now()
		if err := srv.createDatabase(name); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := srv.dropDatabase(name); err != nil {
			b.Fatal(err)
		}
		create += mid.Sub(start)
		drop += time.Since(mid)
	}
	b.ReportMetric(float64(create.Microseconds())/float64(b.N)/1000, "create-ms/op")
	b.ReportMetric(float64(drop.Microseconds())/float64(b.N)/1000, "drop-ms/op")
}
