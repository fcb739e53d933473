package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// dialectCase is one database to run a contract test against.
type dialectCase struct {
	name string
	dsn  func(t *testing.T) string
}

// dialectCases are the two databases every contract test runs on: a private
// PostgreSQL database from testenv and an SQLite file in a temp directory.
var dialectCases = []dialectCase{
	{name: "postgres", dsn: func(t *testing.T) string { return testenv.Postgres(t) }},
	{name: "sqlite", dsn: func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "store.db") }},
}

// openTest opens dsn and closes it when the test ends.
func openTest(t *testing.T, dsn string) *DB {
	t.Helper()
	db, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open(%q): %v", dsn, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

// migrated opens dsn and migrates it.
func migrated(t *testing.T, dsn string) *DB {
	t.Helper()
	db := openTest(t, dsn)
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return db
}

// embeddedMigrations returns the embedded migrations of d.
func embeddedMigrations(t *testing.T, d Dialect) []migration {
	t.Helper()
	migs, err := loadMigrations(migrationFiles, "migrations/"+d.String())
	if err != nil {
		t.Fatalf("load %s migrations: %v", d, err)
	}
	return migs
}

// insertTeam adds a team and returns its id.
func insertTeam(t *testing.T, db *DB, name string) int64 {
	t.Helper()
	var id int64
	err := db.QueryRowContext(context.Background(),
		"INSERT INTO teams (name, balance_microcredits) VALUES ($1, $2) RETURNING id", name, 1_000_000).Scan(&id)
	if err != nil {
		t.Fatalf("insert team %s: %v", name, err)
	}
	return id
}
