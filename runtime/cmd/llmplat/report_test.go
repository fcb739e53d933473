package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/llmplat/llmplat/runtime/costreport"
	"github.com/llmplat/llmplat/runtime/costreport/costreporttest"
	"github.com/llmplat/llmplat/runtime/store"
)

// costreportData is costreport's testdata: the fixture week's snapshots and
// golden reports.
var costreportData = filepath.Join("..", "..", "costreport", "testdata")

// fixtureDSN writes the fixture week into a new SQLite database and
// returns its DSN.
func fixtureDSN(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "report.db")
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := costreporttest.Week(ctx, db); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// TestRunReportOutput runs the command on the fixture week and compares
// its output with costreport's golden files, whose every number
// costreport's tests check by hand.
func TestRunReportOutput(t *testing.T) {
	dsn := fixtureDSN(t)
	week := []string{"--db", dsn, "--from", "2026-03-02", "--to", "2026-03-09T00:00:00Z",
		"--metrics-start", filepath.Join(costreportData, "metrics_start.prom"),
		"--metrics-end", filepath.Join(costreportData, "metrics_end.prom")}
	tests := []struct {
		name   string
		args   []string
		golden string
	}{
		{"table", week, "week.golden.txt"},
		{"json", append([]string{"--format", "json"}, week...), "week.golden.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := runReport(context.Background(), tt.args, &out); err != nil {
				t.Fatalf("runReport(%q): %v", tt.args, err)
			}
			want, err := os.ReadFile(filepath.Join(costreportData, tt.golden))
			if err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != string(want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestRunReportPrice checks that the price flag prices every GPU-hour:
// the fixture's 728 GPU-hours at 1.5 USD.
func TestRunReportPrice(t *testing.T) {
	var out bytes.Buffer
	args := []string{"--db", fixtureDSN(t), "--from", "2026-03-02", "--to", "2026-03-09",
		"--price-usd-per-gpu-hour", "1.5", "--format", "json"}
	if err := runReport(context.Background(), args, &out); err != nil {
		t.Fatal(err)
	}
	var r costreport.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if got, want := r.Total.CostUSD, 728*1.5; got != want {
		t.Errorf("total cost: got %v, want %v", got, want)
	}
	if r.EngineTokenSource != "" || r.Total.Drift != nil {
		t.Errorf("got engine source %q and drift %v without snapshots, want none", r.EngineTokenSource, r.Total.Drift)
	}
}

func TestRunReportErrors(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "unused.db")
	base := []string{"--db", dsn, "--from", "2026-03-02", "--to", "2026-03-09"}
	tests := []struct {
		name    string
		args    []string
		wantErr error
	}{
		{"no --db", []string{"--from", "2026-03-02", "--to", "2026-03-09"}, errReportFlagMissing},
		{"no --to", []string{"--db", dsn, "--from", "2026-03-02"}, errReportFlagMissing},
		{"only one snapshot", append([]string{"--metrics-start", "a.prom"}, base...), errReportFlagMissing},
		{"prometheus and snapshots", append([]string{"--prometheus", "http://127.0.0.1:1",
			"--metrics-start", "a.prom", "--metrics-end", "b.prom"}, base...), errReportFlagConflict},
		{"window backwards", []string{"--db", dsn, "--from", "2026-03-09", "--to", "2026-03-02"}, costreport.ErrBadWindow},
		{"unreadable time", []string{"--db", dsn, "--from", "monday", "--to", "2026-03-09"}, costreport.ErrBadWindow},
		{"unknown format", append([]string{"--format", "xml"}, base...), errUnknownFormat},
		{"unsupported database", []string{"--db", "mysql://x", "--from", "2026-03-02", "--to", "2026-03-09"}, store.ErrUnsupportedDSN},
		{"stray argument", append(base, "extra"), errUnexpectedArgs},
		{"help", []string{"-h"}, flag.ErrHelp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := runReport(context.Background(), tt.args, &out); !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestReportRegistered(t *testing.T) {
	if _, ok := commands["report"]; !ok {
		t.Error("report is not a registered command")
	}
}
