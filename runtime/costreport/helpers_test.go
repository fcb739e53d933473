package costreport

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/costreport/costreporttest"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// week is the fixture week's window.
var week = Window{From: costreporttest.From, To: costreporttest.To}

// snapshotPaths are the fixture week's /metrics snapshots.
var snapshotPaths = []string{filepath.Join("testdata", "metrics_start.prom"), filepath.Join("testdata", "metrics_end.prom")}

// dialectCase is a database the report runs against.
type dialectCase struct {
	name string
	dsn  func(t *testing.T) string
}

// dialects are PostgreSQL from testenv and an SQLite file.
var dialects = []dialectCase{
	{"postgres", func(t *testing.T) string { return testenv.Postgres(t) }},
	{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "report.db") }},
}

// fixtureDB opens and migrates dsn and writes the fixture week into it.
func fixtureDB(t *testing.T, dsn string) *store.DB {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if err := costreporttest.Week(ctx, db); err != nil {
		t.Fatal(err)
	}
	return db
}

// referenceProfiles are the reference workload's capacity profiles: L40S at 2.5 USD.
func referenceProfiles() Profiles { return NewProfiles(capacity.ReferenceInput()) }

// nodeReport generates the fixture report from node events and snapshots.
func nodeReport(t *testing.T, db *store.DB, w Window) Report {
	t.Helper()
	r, err := Generate(context.Background(), db, Options{Window: w,
		GPU: NodeEvents{DB: db, Profiles: referenceProfiles()}, Engine: Snapshots{Paths: snapshotPaths}})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return r
}

// approxEqual compares floats to a relative 1e-9.
func approxEqual(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

// rowOf returns the report's row for model.
func rowOf(t *testing.T, r Report, model string) ModelReport {
	t.Helper()
	for _, m := range r.Models {
		if m.Model == model {
			return m
		}
	}
	t.Fatalf("no row for %s in %+v", model, r.Models)
	return ModelReport{}
}
