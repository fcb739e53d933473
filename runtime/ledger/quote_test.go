package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestQuoteMatchesReserve draws random models and requests and quotes each
// before reserving it for a team whose balance covers any cap: the quote
// must name the cap and the estimate the reservation holds, and refuse
// exactly what the reservation refuses, with the same error.
func TestQuoteMatchesReserve(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(7, 1))
		team := f.team(t, "rich", maxCreditAmount)
		var held, refused int
		for i := range 150 {
			model := fmt.Sprintf("q-%d", i)
			maxContext := 1 + rng.Int64N(100_000)
			if _, err := f.db.ExecContext(ctx, `INSERT INTO models (name, served_name, prompt_price_micro_per_mtok,
				completion_price_micro_per_mtok, max_context_tokens, max_output_tokens) VALUES ($1, $1, $2, $3, $4, $5)`,
				model, rng.Int64N(3_000_000), rng.Int64N(3_000_000), maxContext, 1+rng.Int64N(maxContext)); err != nil {
				t.Fatal(err)
			}
			f.clock.Step(quoteTermsTTL) // the quote sees the new model
			r := Reservation{RequestID: "q-" + model, TeamID: team, Model: model, PromptTokens: rng.Int64N(maxContext + 10)}
			if rng.IntN(2) == 0 {
				r.MaxOutputTokens = 1 + rng.Int64N(2*maxContext)
			}
			if rng.IntN(10) == 0 {
				r.Model = "missing-" + model
			}
			q, qerr := f.l.Quote(ctx, r)
			got, rerr := f.l.Reserve(ctx, r)
			switch {
			case rerr != nil:
				refused++
				if !errors.Is(qerr, ErrUnknownModel) && !errors.Is(qerr, ErrContextTooLong) {
					t.Fatalf("%+v: reserve refused (%v), the quote gave %+v, %v", r, rerr, q, qerr)
				}
				if errors.Is(qerr, ErrUnknownModel) != errors.Is(rerr, ErrUnknownModel) {
					t.Errorf("%+v: the quote refused with %v, the reservation with %v", r, qerr, rerr)
				}
			case qerr != nil:
				t.Errorf("%+v: the quote refused (%v) what the reservation held as %+v", r, qerr, got)
			default:
				held++
				if q.MaxOutputTokens != got.MaxOutputTokens || q.Microcredits != got.Microcredits {
					t.Errorf("%+v: quoted %d for %d tokens, reserved %d for %d",
						r, q.Microcredits, q.MaxOutputTokens, got.Microcredits, got.MaxOutputTokens)
				}
			}
		}
		if held < 50 || refused < 10 {
			t.Errorf("held %d and refused %d of 150: the draw does not exercise both", held, refused)
		}
		var n int
		if err := f.db.QueryRowContext(ctx, "SELECT count(*) FROM usage_ledger").Scan(&n); err != nil || n != held {
			t.Errorf("ledger holds %d rows (%v), want %d: a quote wrote", n, err, held)
		}
		f.checkBooks(t)
	})
}

// TestQuoteTrustsTermsForTTL checks that a quote reads the models' terms
// at most once per quoteTermsTTL, and sees a change after it.
func TestQuoteTrustsTermsForTTL(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		team := f.team(t, "a", 1_000_000)
		r := Reservation{RequestID: "q", TeamID: team, Model: m8b, PromptTokens: 10}
		before, err := f.l.Quote(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.db.ExecContext(ctx, "UPDATE models SET max_output_tokens = 7 WHERE name = $1", m8b); err != nil {
			t.Fatal(err)
		}
		cached, err := f.l.Quote(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if cached.MaxOutputTokens != before.MaxOutputTokens {
			t.Errorf("within the TTL the cap is %d, want the cached %d", cached.MaxOutputTokens, before.MaxOutputTokens)
		}
		f.clock.Step(quoteTermsTTL)
		after, err := f.l.Quote(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if after.MaxOutputTokens != 7 {
			t.Errorf("after the TTL the cap is %d, want 7", after.MaxOutputTokens)
		}
	})
}

// TestReserveReportsAvailable checks the team's available balance each
// reservation reports, alone and in concurrent (batched) reservations: no
// reservation may report more than was available once it held, and the
// last to commit reports what is left.
func TestReserveReportsAvailable(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		const credit = 100_000
		team := f.team(t, "a", credit)
		first := f.reserve(t, req("first", team))
		if want := credit - first.Microcredits; first.Available != want {
			t.Errorf("first reservation reports %d available, want %d", first.Available, want)
		}
		const n = 40
		got := make([]Reserved, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { got[i] = f.reserve(t, req(fmt.Sprintf("r-%d", i), team)) })
		}
		wg.Wait()
		left := f.balance(t, team)
		lowest := got[0].Available
		for _, g := range got {
			lowest = min(lowest, g.Available)
			if g.Available > credit-first.Microcredits-g.Microcredits {
				t.Errorf("%s reports %d available, more than its own hold leaves", g.RequestID, g.Available)
			}
		}
		if want := left.Balance - left.Reserved; lowest != want {
			t.Errorf("lowest available reported %d, want what is left: %d", lowest, want)
		}
		dup, err := f.l.Reserve(context.Background(), req("first", team))
		if err != nil || !dup.Existing || dup.Available != 0 {
			t.Errorf("repeated reservation: %+v, %v; want Existing with nothing known of the balance", dup, err)
		}
	})
}

// quoteWaitDeadline bounds how long TestQuoteDoesNotWaitForAReload waits
// for a condition: far longer than any step takes, so only a quote that
// blocks reaches it.
const quoteWaitDeadline = 30 * time.Second

// TestQuoteDoesNotWaitForAReload: when the terms are due for a reload and
// one caller is reloading them from a database that does not answer (the
// models table locked), another quote answers at once from the terms it
// has, and the reloading caller gets the new terms once the database
// answers.
func TestQuoteDoesNotWaitForAReload(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, testenv.Postgres(t))
	team := f.team(t, "a", 1_000_000)
	r := Reservation{RequestID: "q", TeamID: team, Model: m8b, PromptTokens: 10}
	before, err := f.l.Quote(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.ExecContext(ctx, "UPDATE models SET max_output_tokens = 7 WHERE name = $1", m8b); err != nil {
		t.Fatal(err)
	}
	lock, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback() }()
	if _, err := lock.ExecContext(ctx, "LOCK TABLE models IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(quoteTermsTTL)
	type result struct {
		got Reserved
		err error
	}
	reloading := make(chan result, 1)
	go func() {
		got, err := f.l.Quote(ctx, r)
		reloading <- result{got, err}
	}()
	testenv.EventuallyWithin(t, quoteWaitDeadline, "the reloading quote to wait on the locked models table", func() bool {
		var waiting int
		if err := f.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%FROM models%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
	other := make(chan result, 1)
	go func() {
		got, err := f.l.Quote(ctx, r)
		other <- result{got, err}
	}()
	answered := false
	select {
	case res := <-other:
		answered = true
		if res.err != nil || res.got.MaxOutputTokens != before.MaxOutputTokens {
			t.Errorf("quote during a reload = %+v, %v; want the terms in hand (cap %d)", res.got, res.err, before.MaxOutputTokens)
		}
	case <-time.After(quoteWaitDeadline):
		t.Error("a quote waited for another caller's reload")
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if res := <-reloading; res.err != nil || res.got.MaxOutputTokens != 7 {
		t.Errorf("reloading quote = %+v, %v; want the new cap 7", res.got, res.err)
	}
	if !answered {
		<-other // it answers once the reload ends
	}
}
