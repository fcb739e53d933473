package store

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDSN(t *testing.T) {
	tests := []struct {
		name       string
		dsn        string
		dialect    Dialect
		driver     string
		sourceHas  []string
		sourceLack []string
		singleConn bool
		wantErr    error
	}{
		{name: "postgres", dsn: "postgres://u@h:5432/db?sslmode=disable", dialect: Postgres, driver: "pgx",
			sourceHas: []string{"postgres://u@h:5432/db?", "sslmode=disable", "connect_timeout=5"}},
		{name: "postgresql", dsn: "postgresql://u@h/db", dialect: Postgres, driver: "pgx",
			sourceHas: []string{"postgresql://u@h/db?connect_timeout=5"}},
		{name: "postgres own connect timeout", dsn: "postgres://u@h/db?connect_timeout=2", dialect: Postgres, driver: "pgx",
			sourceHas: []string{"connect_timeout=2"}, sourceLack: []string{"connect_timeout=5"}},
		{name: "sqlite file", dsn: "sqlite:/var/lib/x/db.sqlite", dialect: SQLite, driver: "sqlite",
			sourceHas: []string{"/var/lib/x/db.sqlite?", "journal_mode%28WAL%29", "busy_timeout%2810000%29",
				"foreign_keys%281%29", "_txlock=immediate", "_time_format=sqlite", "_timezone=UTC"}},
		{name: "sqlite relative", dsn: "sqlite:db.sqlite", dialect: SQLite, driver: "sqlite",
			sourceHas: []string{"db.sqlite?"}},
		{name: "sqlite memory", dsn: "sqlite::memory:", dialect: SQLite, driver: "sqlite", singleConn: true,
			sourceHas: []string{":memory:?", "foreign_keys%281%29", "_txlock=immediate"}, sourceLack: []string{"WAL"}},
		{name: "sqlite empty path", dsn: "sqlite:", wantErr: ErrUnsupportedDSN},
		{name: "sqlite with query", dsn: "sqlite:db?mode=ro", wantErr: ErrUnsupportedDSN},
		{name: "sqlite uri", dsn: "sqlite:file:db", wantErr: ErrUnsupportedDSN},
		{name: "mysql", dsn: "mysql://u@h/db", wantErr: ErrUnsupportedDSN},
		{name: "bare path", dsn: "/tmp/db.sqlite", wantErr: ErrUnsupportedDSN},
		{name: "empty", dsn: "", wantErr: ErrUnsupportedDSN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDSN(tt.dsn)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("parseDSN(%q) error = %v, want %v", tt.dsn, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseDSN(%q): %v", tt.dsn, err)
			}
			if got.dialect != tt.dialect || got.driver != tt.driver || got.singleConn != tt.singleConn {
				t.Errorf("parseDSN(%q) = %v/%s single=%v, want %v/%s single=%v",
					tt.dsn, got.dialect, got.driver, got.singleConn, tt.dialect, tt.driver, tt.singleConn)
			}
			for _, s := range tt.sourceHas {
				if !strings.Contains(got.source, s) {
					t.Errorf("source %q lacks %q", got.source, s)
				}
			}
			for _, s := range tt.sourceLack {
				if strings.Contains(got.source, s) {
					t.Errorf("source %q has %q", got.source, s)
				}
			}
		})
	}
}

func TestDialect(t *testing.T) {
	tests := []struct {
		d         Dialect
		name      string
		forUpdate string
	}{
		{d: Postgres, name: "postgres", forUpdate: " FOR UPDATE"},
		{d: SQLite, name: "sqlite", forUpdate: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.String(); got != tt.name {
				t.Errorf("String() = %q, want %q", got, tt.name)
			}
			if got := tt.d.ForUpdate(); got != tt.forUpdate {
				t.Errorf("ForUpdate() = %q, want %q", got, tt.forUpdate)
			}
		})
	}
}
