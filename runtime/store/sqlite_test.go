package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

func TestSQLiteSettingsOnEveryConnection(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	// Hold two connections at once, so the second is not the first reused.
	var conns []*sql.Conn
	for range 2 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatalf("take connection: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	tests := []struct {
		pragma string
		want   string
	}{
		{pragma: "journal_mode", want: "wal"},
		{pragma: "foreign_keys", want: "1"},
		{pragma: "busy_timeout", want: "10000"},
		{pragma: "synchronous", want: "1"}, // NORMAL
	}
	for _, tt := range tests {
		t.Run(tt.pragma, func(t *testing.T) {
			for i, c := range conns {
				var got string
				if err := c.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				if got != tt.want {
					t.Errorf("connection %d: %s = %q, want %q", i, tt.pragma, got, tt.want)
				}
			}
		})
	}
}

func TestSQLiteMemoryKeepsOneConnection(t *testing.T) {
	ctx := context.Background()
	db := migrated(t, "sqlite::memory:")
	if got := db.Stats().MaxOpenConnections; got != 1 {
		t.Fatalf("MaxOpenConnections = %d, want 1", got)
	}
	if db.Dialect() != SQLite {
		t.Errorf("Dialect() = %v, want sqlite", db.Dialect())
	}
	// The schema Migrate wrote in its transactions is still there for later
	// statements, and a second Migrate finds it current.
	team := insertTeam(t, db, "mem")
	var name string
	if err := db.QueryRowContext(ctx, "SELECT name FROM teams WHERE id = $1", team).Scan(&name); err != nil {
		t.Fatalf("read team: %v", err)
	}
	if name != "mem" {
		t.Errorf("name = %q, want mem", name)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Errorf("second Migrate: %v", err)
	}
}

func TestOpenReportsDialect(t *testing.T) {
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			db := openTest(t, dc.dsn(t))
			if got := db.Dialect().String(); got != dc.name {
				t.Errorf("Dialect() = %s, want %s", got, dc.name)
			}
		})
	}
}
