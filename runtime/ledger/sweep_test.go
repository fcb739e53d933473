package ledger

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestSweep(t *testing.T) {
	ctx := context.Background()
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 100_000)
		f.reserve(t, req("reported", team))
		f.reserve(t, req("silent", team))
		f.reserve(t, req("finished", team))
		if _, err := f.l.Settle(ctx, "finished", Usage{PromptTokens: 10, CompletionTokens: 10}, SourceExact); err != nil {
			t.Fatal(err)
		}
		nodeUsage := Usage{PromptTokens: 1000, CompletionTokens: 250}
		f.log.report("reported", nodeUsage)
		f.log.report("finished", Usage{PromptTokens: 1, CompletionTokens: 1})
		f.clock.Step(DefaultSweepAfter - time.Second)
		f.reserve(t, req("fresh", team))
		f.log.report("fresh", nodeUsage)
		if got, err := f.l.Sweep(ctx); err != nil || got != (SweepResult{}) {
			t.Fatalf("Sweep before the window = %+v, %v; want nothing moved", got, err)
		}
		f.clock.Step(2 * time.Second)
		got, err := f.l.Sweep(ctx)
		if err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		if want := (SweepResult{Settled: 1, Cancelled: 1}); got != want {
			t.Fatalf("Sweep = %+v, want %+v", got, want)
		}
		out, err := f.l.Settle(ctx, "reported", Usage{}, SourceExact) // reads the row back
		if err != nil || out.Applied || out.Status != StatusSettled || out.Source != SourceNodeLog || out.Usage != nodeUsage {
			t.Fatalf("reported row = %+v, %v; want settled from the node log with %+v", out, err, nodeUsage)
		}
		if f.status(t, "silent") != StatusCancelled || f.status(t, "fresh") != StatusReserved {
			t.Fatalf("silent is %s, fresh is %s; want cancelled and reserved", f.status(t, "silent"), f.status(t, "fresh"))
		}
		cost := Cost(1000, 250, m8bPrompt, m8bOut) + Cost(10, 10, m8bPrompt, m8bOut)
		if b := f.balance(t, team); b.Balance != 100_000-cost || b.Reserved != hold {
			t.Fatalf("balance = %+v, want %d with the fresh hold", b, 100_000-cost)
		}
		if again, err := f.l.Sweep(ctx); err != nil || again != (SweepResult{}) {
			t.Fatalf("second Sweep = %+v, %v; want nothing moved", again, err)
		}
		f.checkBooks(t)
	})
}

func TestSweepWithoutCompletionLogCancels(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 100_000)
		f.reserve(t, req("r1", team))
		f.log.report("r1", Usage{PromptTokens: 5, CompletionTokens: 5}) // not consulted
		l := f.ledger(t, Config{SweepAfter: time.Minute})
		f.clock.Step(time.Minute + time.Second)
		got, err := l.Sweep(context.Background())
		if err != nil || got != (SweepResult{Cancelled: 1}) {
			t.Fatalf("Sweep = %+v, %v; want one cancelled", got, err)
		}
		if b := f.balance(t, team); b.Balance != 100_000 || b.Reserved != 0 {
			t.Fatalf("balance = %+v, want untouched and nothing held", b)
		}
	})
}

func TestSweepLeavesRowsItCannotCheck(t *testing.T) {
	logDown := errors.New("completion log unavailable")
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 100_000)
		f.reserve(t, req("r1", team))
		f.reserve(t, req("r2", team))
		f.log.err = logDown
		f.clock.Step(DefaultSweepAfter + time.Second)
		got, err := f.l.Sweep(context.Background())
		wantErr(t, "Sweep", err, logDown)
		if got != (SweepResult{}) || f.status(t, "r1") != StatusReserved || f.status(t, "r2") != StatusReserved {
			t.Fatalf("Sweep = %+v; want both rows left reserved for a later sweep", got)
		}
		f.log.err = nil
		if got, err := f.l.Sweep(context.Background()); err != nil || got.Cancelled != 2 {
			t.Fatalf("Sweep after recovery = %+v, %v; want both cancelled", got, err)
		}
		f.checkBooks(t)
	})
}

func TestSweepRacesLateSettle(t *testing.T) {
	const rounds = 8
	exact := Usage{PromptTokens: 1000, CompletionTokens: 300}
	logged := Usage{PromptTokens: 1000, CompletionTokens: 290}
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 100_000)
		var debits int64
		for round := range rounds {
			id := fmt.Sprint("late-", round)
			f.reserve(t, req(id, team))
			f.log.report(id, logged)
			f.clock.Step(DefaultSweepAfter + time.Second)
			var settled Outcome
			var swept SweepResult
			var errSettle, errSweep error
			runTogether(2, func(i int) {
				if i == 0 {
					settled, errSettle = f.l.Settle(context.Background(), id, exact, SourceExact)
				} else {
					swept, errSweep = f.l.Sweep(context.Background())
				}
			})
			if errSettle != nil || errSweep != nil {
				t.Fatalf("round %d: settle %v, sweep %v", round, errSettle, errSweep)
			}
			if settled.Applied == (swept.Settled == 1) {
				t.Fatalf("round %d: settle applied %t, sweep settled %d; want exactly one", round, settled.Applied, swept.Settled)
			}
			winner := logged
			if settled.Applied {
				winner = exact
			}
			debits += Cost(winner.PromptTokens, winner.CompletionTokens, m8bPrompt, m8bOut)
			if settled.Usage != winner || settled.Status != StatusSettled {
				t.Fatalf("round %d: settle saw %+v, want the winner's usage %+v", round, settled, winner)
			}
			if b := f.balance(t, team); b.Balance != 100_000-debits || b.Reserved != 0 {
				t.Fatalf("round %d: balance = %+v, want %d after one debit per request", round, b, 100_000-debits)
			}
		}
		f.checkBooks(t)
	})
}

func TestSweepWorksThroughBatches(t *testing.T) {
	const rows = 2*sweepBatch + 17
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", rows*hold)
		for i := range rows {
			f.reserve(t, req(fmt.Sprint("b-", i), team))
		}
		f.clock.Step(DefaultSweepAfter + time.Second)
		got, err := f.l.Sweep(context.Background())
		if err != nil || got != (SweepResult{Cancelled: rows}) {
			t.Fatalf("Sweep = %+v, %v; want all %d cancelled", got, err, rows)
		}
		if b := f.balance(t, team); b.Reserved != 0 {
			t.Fatalf("reserved = %d after the sweep, want 0", b.Reserved)
		}
	})
}

func TestRunSweepsUntilCancelled(t *testing.T) {
	const patience = 10 * time.Second // far beyond a few 10 ms intervals
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 100_000)
		l := f.ledger(t, Config{SweepInterval: 10 * time.Millisecond, Completions: f.log})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ran := make(chan error, 1) // Run's one result
		go func() { ran <- l.Run(ctx) }()
		f.reserve(t, req("orphan", team))
		f.clock.Step(DefaultSweepAfter + time.Second)
		testenv.EventuallyWithin(t, patience, "Run to sweep the orphan", func() bool {
			return f.status(t, "orphan") != StatusReserved
		})
		cancel()
		if err := <-ran; err != nil {
			t.Fatalf("Run = %v, want nil once ctx ends", err)
		}
		if f.status(t, "orphan") != StatusCancelled {
			t.Fatalf("orphan is %s, want cancelled", f.status(t, "orphan"))
		}
	})
}

// TestSweptSettleTold: the hook hears of each row the sweeper settled,
// once, with its usage, and not of rows it cancelled.
func TestSweptSettleTold(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 100_000)
		f.reserve(t, req("reported", team))
		f.reserve(t, req("silent", team))
		nodeUsage := Usage{PromptTokens: 100, CompletionTokens: 25}
		f.log.report("reported", nodeUsage)
		var told []Outcome
		l := f.ledger(t, Config{SweepAfter: time.Minute, Completions: f.log,
			SweptSettle: func(_ context.Context, o Outcome) { told = append(told, o) }})
		f.clock.Step(time.Minute + time.Second)
		for range 2 {
			if _, err := l.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if len(told) != 1 || told[0].RequestID != "reported" || told[0].Usage != nodeUsage || told[0].Status != StatusSettled {
			t.Errorf("told %+v, want the one settled row with its usage", told)
		}
	})
}
