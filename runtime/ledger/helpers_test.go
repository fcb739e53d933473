package ledger

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// dialectCase is one database the contract suite runs against.
type dialectCase struct {
	name string
	dsn  func(tb testing.TB) string
}

// dialects are the two databases every contract test runs on: a private
// PostgreSQL database and an SQLite file in a temp directory.
var dialects = []dialectCase{
	{name: "postgres", dsn: func(tb testing.TB) string { return testenv.Postgres(tb) }},
	{name: "sqlite", dsn: func(tb testing.TB) string { return "sqlite:" + filepath.Join(tb.TempDir(), "l.db") }},
}

// The test models. Prices make round numbers: 1,000 prompt tokens and 500
// completion tokens of "m8b" cost 200 + 300 micro-credits.
const (
	m8b        = "m8b"
	m8bPrompt  = 200_000 // micro-credits per million prompt tokens
	m8bOut     = 600_000 // micro-credits per million completion tokens
	m8bContext = 8192
	m8bMaxOut  = 4096
	m70b       = "m70b"
)

// startTime is the fake clock's start; whole seconds, so both dialects
// store it exactly.
var startTime = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeLog is a CompletionLog held in memory.
type fakeLog struct {
	mu    sync.Mutex
	usage map[string]Usage
	err   error // returned for every lookup when set
}

// Completion implements CompletionLog.
func (f *fakeLog) Completion(_ context.Context, requestID string) (Usage, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Usage{}, false, f.err
	}
	u, ok := f.usage[requestID]
	return u, ok, nil
}

// report records that a node finished requestID with u.
func (f *fakeLog) report(requestID string, u Usage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.usage == nil {
		f.usage = map[string]Usage{}
	}
	f.usage[requestID] = u
}

// fixture is a migrated database with models, a ledger on a fake clock and
// a completion log.
type fixture struct {
	db    *store.DB
	l     *Ledger
	clock *testingclock.FakeClock
	log   *fakeLog
}

// forEachDialect runs fn as a subtest on each dialect with a fresh fixture.
func forEachDialect(t *testing.T, fn func(t *testing.T, f *fixture)) {
	t.Helper()
	for _, dc := range dialects {
		t.Run(dc.name, func(t *testing.T) { fn(t, newFixture(t, dc.dsn(t))) })
	}
}

// newFixture opens and migrates dsn, declares the test models and builds a
// ledger on it.
func newFixture(tb testing.TB, dsn string) *fixture {
	tb.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	if err := db.Migrate(ctx); err != nil {
		tb.Fatalf("migrate: %v", err)
	}
	_, err = db.ExecContext(ctx, `INSERT INTO models (name, served_name, prompt_price_micro_per_mtok,
		completion_price_micro_per_mtok, max_context_tokens, max_output_tokens)
		VALUES ($1, $1, $2, $3, $4, $5), ($6, $6, 900000, 2700000, 32768, 8192)`,
		m8b, m8bPrompt, m8bOut, m8bContext, m8bMaxOut, m70b)
	if err != nil {
		tb.Fatalf("insert models: %v", err)
	}
	f := &fixture{db: db, clock: testingclock.NewFakeClock(startTime), log: &fakeLog{}}
	f.l = f.ledger(tb, Config{Completions: f.log})
	return f
}

// ledger returns a ledger on the fixture's database and clock with cfg.
func (f *fixture) ledger(tb testing.TB, cfg Config) *Ledger {
	tb.Helper()
	cfg.Clock = f.clock
	l, err := New(f.db, cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return l
}

// team creates a team holding credit micro-credits, granted through
// AddCredit, and returns its id.
func (f *fixture) team(tb testing.TB, name string, credit int64) int64 {
	tb.Helper()
	var id int64
	err := f.db.QueryRowContext(context.Background(),
		"INSERT INTO teams (name) VALUES ($1) RETURNING id", name).Scan(&id)
	if err != nil {
		tb.Fatalf("insert team %s: %v", name, err)
	}
	if credit != 0 {
		if _, err := f.l.AddCredit(context.Background(), id, "opening-"+name, credit, "opening"); err != nil {
			tb.Fatalf("credit team %s: %v", name, err)
		}
	}
	return id
}

// reserve reserves r and fails the test on an error.
func (f *fixture) reserve(tb testing.TB, r Reservation) Reserved {
	tb.Helper()
	got, err := f.l.Reserve(context.Background(), r)
	if err != nil {
		tb.Fatalf("Reserve(%+v): %v", r, err)
	}
	return got
}

// balance returns the team's balance and fails the test on an error.
func (f *fixture) balance(tb testing.TB, team int64) Balance {
	tb.Helper()
	b, err := f.l.Balance(context.Background(), team)
	if err != nil {
		tb.Fatalf("Balance(%d): %v", team, err)
	}
	return b
}

// status returns the status of requestID's row.
func (f *fixture) status(tb testing.TB, requestID string) string {
	tb.Helper()
	var s string
	err := f.db.QueryRowContext(context.Background(),
		"SELECT status FROM usage_ledger WHERE request_id = $1", requestID).Scan(&s)
	if err != nil {
		tb.Fatalf("status of %s: %v", requestID, err)
	}
	return s
}

// checkBooks fails the test unless every team's balance equals its credits
// minus its settled costs and its reserved amount equals the sum of its
// open reservations, both recomputed from the rows (Audit).
func (f *fixture) checkBooks(tb testing.TB) {
	tb.Helper()
	if _, err := f.l.Audit(context.Background()); err != nil {
		tb.Error(err)
	}
}

// req is a reservation of team for m8b with 1,000 prompt tokens and an
// explicit max of 500 output tokens (estimate 500 micro-credits).
func req(id string, team int64) Reservation {
	return Reservation{RequestID: id, TeamID: team, Model: m8b, PromptTokens: 1000, MaxOutputTokens: 500}
}

// wantErr fails the test unless err is target.
func wantErr(tb testing.TB, what string, err, target error) {
	tb.Helper()
	if !errors.Is(err, target) {
		tb.Fatalf("%s: error = %v, want %v", what, err, target)
	}
}
