package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// tally is what the concurrent run's workers saw the ledger do.
type tally struct {
	mu       sync.Mutex
	balance  map[int64]int64 // Σ applied credits − Σ applied settle costs
	reserved int             // successful reservations
	finished int             // reservations moved out of 'reserved' by this run's calls
}

// add records a balance change and finished reservations.
func (y *tally) add(team, delta int64, reserved, finished int) {
	y.mu.Lock()
	defer y.mu.Unlock()
	y.balance[team] += delta
	y.reserved += reserved
	y.finished += finished
}

func TestRandomizedConcurrent(t *testing.T) {
	const workers, steps = 4, 60
	forEachDialect(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		teams := []int64{f.team(t, "a", 0), f.team(t, "b", 0)}
		y := &tally{balance: map[int64]int64{}}
		sweeper := f.ledger(t, Config{}) // cancels only, so every debit is a worker's
		var stop atomic.Bool
		swept := make(chan error, 1) // the sweeper's one result
		go func() {
			var err error
			for !stop.Load() && err == nil {
				f.clock.Step(2 * time.Minute)
				var res SweepResult
				res, err = sweeper.Sweep(ctx)
				y.add(0, 0, 0, res.Settled+res.Cancelled)
				time.Sleep(2 * time.Millisecond) // lets the workers' reservations age between sweeps
			}
			swept <- err
		}()
		errs := make([]error, workers)
		runTogether(workers, func(w int) {
			errs[w] = concurrentWorker(ctx, f.l, rand.New(rand.NewPCG(randomSeed, uint64(w)+10)), fmt.Sprint("w", w), steps, teams, y)
		})
		stop.Store(true)
		if err := <-swept; err != nil {
			t.Fatalf("sweeper: %v", err)
		}
		for w, err := range errs {
			if err != nil {
				t.Fatalf("worker %d: %v", w, err)
			}
		}
		f.clock.Step(DefaultSweepAfter + time.Second)
		last, err := sweeper.Sweep(ctx)
		if err != nil {
			t.Fatalf("last sweep: %v", err)
		}
		y.add(0, 0, 0, last.Cancelled)
		if y.finished != y.reserved {
			t.Fatalf("%d reservations finished by some call, want each of the %d exactly once", y.finished, y.reserved)
		}
		for _, team := range teams {
			if b := f.balance(t, team); b.Balance != y.balance[team] || b.Reserved != 0 {
				t.Fatalf("team %d = %+v, want balance %d and nothing held", team, b, y.balance[team])
			}
		}
		f.checkBooks(t)
		t.Logf("%d reservations, %d swept at the end", y.reserved, last.Cancelled)
	})
}

// concurrentWorker runs steps random operations of worker w and records
// their effects in y.
func concurrentWorker(ctx context.Context, l *Ledger, rng *rand.Rand, w string, steps int, teams []int64, y *tally) error {
	var open, done []string
	keys := map[string]int64{}
	for step := range steps {
		team := teams[rng.IntN(len(teams))]
		id := fmt.Sprintf("%s-%d", w, step)
		switch op := rng.IntN(10); {
		case op < 2:
			key, amount := "c-"+id, rng.Int64N(20_000)+1
			if len(keys) > 0 && rng.IntN(3) == 0 {
				key = pickKey(rng, keys) // a retried grant
				amount = keys[key]
			}
			c, err := l.AddCredit(ctx, team, key, amount, "")
			if errors.Is(err, ErrIdempotencyConflict) && c.TeamID != team {
				continue // a retry aimed at another team: refused, nothing changed
			}
			if err != nil {
				return fmt.Errorf("credit: %w", err)
			}
			if c.Applied {
				keys[key] = amount
				y.add(team, amount, 0, 0)
			}
		case op < 6:
			r := Reservation{RequestID: id, TeamID: team, Model: m8b, PromptTokens: rng.Int64N(2000) + 1, MaxOutputTokens: rng.Int64N(800)}
			_, err := l.Reserve(ctx, r)
			if errors.Is(err, ErrInsufficientBalance) {
				continue
			}
			if err != nil {
				return fmt.Errorf("reserve: %w", err)
			}
			open = append(open, id)
			y.add(team, 0, 1, 0)
		case op < 9 && len(open) > 0:
			i := rng.IntN(len(open))
			rid := open[i]
			open = append(open[:i], open[i+1:]...)
			var out Outcome
			var err error
			switch {
			case op < 7:
				out, err = l.Settle(ctx, rid, Usage{PromptTokens: rng.Int64N(2000), CompletionTokens: rng.Int64N(900)}, SourceExact)
			case op == 7 && rng.IntN(2) == 0:
				// The client left, or the node died, mid-stream: what was
				// produced, perhaps nothing (the row is then cancelled).
				src := []Source{SourcePartial, SourceNodeLog}[rng.IntN(2)]
				out, err = l.Settle(ctx, rid, Usage{PromptTokens: rng.Int64N(2) * rng.Int64N(2000), CompletionTokens: rng.Int64N(2) * rng.Int64N(300)}, src)
			default:
				out, err = l.Cancel(ctx, rid)
			}
			if err != nil {
				return fmt.Errorf("finish %s: %w", rid, err)
			}
			if !out.Applied && out.Status != StatusCancelled {
				return fmt.Errorf("finish %s: lost to %+v, but only the sweeper (which cancels) competes", rid, out)
			}
			if out.Applied {
				y.add(out.TeamID, -out.CostMicrocredits, 0, 1)
			}
			done = append(done, rid)
		case len(done) > 0:
			rid := done[rng.IntN(len(done))]
			if out, err := l.Settle(ctx, rid, Usage{PromptTokens: 5}, SourcePartial); err != nil || out.Applied {
				return fmt.Errorf("retried settle of %s = %+v, %v; want unapplied", rid, out, err)
			}
		}
	}
	return nil
}

// propertyRounds is how many random interleavings TestLedgerProperty runs:
// LLMPLAT_PROPERTY_ROUNDS, or 100 (about 15,000 operations).
func propertyRounds(t *testing.T) int {
	if v := os.Getenv("LLMPLAT_PROPERTY_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LLMPLAT_PROPERTY_ROUNDS=%q: want a positive number", v)
		}
		return n
	}
	return 100
}

// TestLedgerProperty: random interleavings of credits, reservations,
// exact settles, settles of a client that left or a node that died
// (partial, node log, perhaps nothing produced), cancels, retried settles
// and sweeps, by workers of two gateway processes (two ledgers, each with
// its own connection pool and batches) on one PostgreSQL. After every
// round the books balance (balance = credits − settled costs, reserved =
// the open rows); at the end every reservation was finished exactly once
// and every team's balance is what the calls that applied say.
func TestLedgerProperty(t *testing.T) {
	dsn := testenv.Postgres(t)
	f := newFixture(t, dsn)
	second, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	gateways := []*Ledger{f.l, nil}
	if gateways[1], err = New(second, Config{Clock: f.clock}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	teams := []int64{f.team(t, "a", 0), f.team(t, "b", 0), f.team(t, "c", 0)}
	y := &tally{balance: map[int64]int64{}}
	sweeper := f.ledger(t, Config{}) // cancels only, so every debit is a worker's
	rounds := propertyRounds(t)
	const workersPerGateway, steps = 3, 25
	for round := range rounds {
		var stop atomic.Bool
		swept := make(chan error, 1)
		go func() {
			var err error
			for !stop.Load() && err == nil {
				f.clock.Step(2 * time.Minute)
				var res SweepResult
				res, err = sweeper.Sweep(ctx)
				y.add(0, 0, 0, res.Settled+res.Cancelled)
				// Pacing only, so the sweeper does not spin: no check
				// depends on when it runs, every interleaving is valid.
				time.Sleep(time.Millisecond)
			}
			swept <- err
		}()
		n := workersPerGateway * len(gateways)
		errs := make([]error, n)
		runTogether(n, func(w int) {
			rng := rand.New(rand.NewPCG(randomSeed+uint64(round), uint64(w)))
			errs[w] = concurrentWorker(ctx, gateways[w%len(gateways)], rng, fmt.Sprintf("r%d-g%d-w%d", round, w%len(gateways), w), steps, teams, y)
		})
		stop.Store(true)
		if err := <-swept; err != nil {
			t.Fatalf("round %d: sweeper: %v", round, err)
		}
		for w, err := range errs {
			if err != nil {
				t.Fatalf("round %d, worker %d: %v", round, w, err)
			}
		}
		f.checkBooks(t)
		if t.Failed() {
			t.Fatalf("round %d broke the books", round)
		}
	}
	f.clock.Step(DefaultSweepAfter + time.Second)
	last, err := sweeper.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	y.add(0, 0, 0, last.Cancelled)
	if y.finished != y.reserved {
		t.Fatalf("%d reservations finished by some call, want each of the %d exactly once", y.finished, y.reserved)
	}
	for _, team := range teams {
		if b := f.balance(t, team); b.Balance != y.balance[team] || b.Reserved != 0 {
			t.Fatalf("team %d = %+v, want balance %d and nothing held", team, b, y.balance[team])
		}
	}
	f.checkBooks(t)
	t.Logf("%d rounds, %d reservations, each finished once", rounds, y.reserved)
}
