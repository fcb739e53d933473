package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestReserveFastMatchesTx draws random models and requests and reserves
// each twice on PostgreSQL, for two teams of the same balance: once with
// the one-statement path, once with the transaction. Where the fast path takes a reservation, both must
// hold the same estimate and cap; where the transaction refuses or shrinks
// the cap, the fast path must step aside and change nothing.
func TestReserveFastMatchesTx(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, dialects[0].dsn(t))
	rng := rand.New(rand.NewPCG(4, 2))
	var taken, declined int
	for i := range 300 {
		model := fmt.Sprintf("rand-%d", i)
		maxContext := 1 + rng.Int64N(200_000)
		prices := []int64{0, 1, 7, 999_999, 1_000_001, 2_700_000, rng.Int64N(1 << 40)}
		if _, err := f.db.ExecContext(ctx, `INSERT INTO models (name, served_name, prompt_price_micro_per_mtok,
			completion_price_micro_per_mtok, max_context_tokens, max_output_tokens) VALUES ($1, $1, $2, $3, $4, $5)`,
			model, prices[rng.IntN(len(prices))], prices[rng.IntN(len(prices))], maxContext, 1+rng.Int64N(maxContext)); err != nil {
			t.Fatal(err)
		}
		balances := []int64{0, 1, 1_000, 1_000_000, maxCreditAmount}
		credit := balances[rng.IntN(len(balances))]
		team, slowTeam := f.team(t, "t"+model, credit), f.team(t, "s"+model, credit)
		r := Reservation{RequestID: "fast-" + model, TeamID: team, Model: model, PromptTokens: rng.Int64N(maxContext + 10)}
		if rng.IntN(2) == 0 {
			r.MaxOutputTokens = 1 + rng.Int64N(2*maxContext)
		}
		before := f.balance(t, team)
		fast, ok, err := f.l.reserveFast(ctx, r)
		if err != nil {
			t.Fatalf("reserveFast(%+v): %v", r, err)
		}
		slowReq := r
		slowReq.RequestID, slowReq.TeamID = "slow-"+model, slowTeam
		var slow Reserved
		slowErr := f.db.InTx(ctx, func(tx *sql.Tx) error {
			var err error
			slow, err = f.l.reserveTx(ctx, tx, slowReq)
			return err
		})
		switch {
		case ok && slowErr != nil:
			t.Errorf("%+v: fast reserved %+v, the transaction refused: %v", r, fast, slowErr)
		case ok && (fast.Microcredits != slow.Microcredits || fast.MaxOutputTokens != slow.MaxOutputTokens):
			t.Errorf("%+v: fast reserved %d for %d tokens, the transaction %d for %d",
				r, fast.Microcredits, fast.MaxOutputTokens, slow.Microcredits, slow.MaxOutputTokens)
		case ok:
			taken++
			if got, want := f.balance(t, team).Reserved, before.Reserved+fast.Microcredits; got != want {
				t.Errorf("%+v: team holds %d, want %d", r, got, want)
			}
		default:
			declined++
			// The fast path declines only what the transaction refuses
			// or shrinks to the balance, and changes nothing.
			if slowErr == nil && (r.MaxOutputTokens != 0 || slow.MaxOutputTokens == mustClamp(t, f, r)) {
				t.Errorf("%+v: fast declined what the transaction reserved as %+v", r, slow)
			}
			var n int
			if err := f.db.QueryRowContext(ctx, "SELECT count(*) FROM usage_ledger WHERE request_id = $1", r.RequestID).Scan(&n); err != nil || n != 0 {
				t.Errorf("%+v: declined fast path left %d rows (%v)", r, n, err)
			}
			if got := f.balance(t, team).Reserved; got != before.Reserved {
				t.Errorf("%+v: declined fast path: team holds %d, want %d", r, got, before.Reserved)
			}
		}
	}
	if taken < 50 || declined < 50 {
		t.Errorf("fast path took %d and declined %d of 300: the draw does not exercise both", taken, declined)
	}
	f.checkBooks(t)
}

// mustClamp is the cap the model allows r before the balance is looked at.
func mustClamp(t *testing.T, f *fixture, r Reservation) int64 {
	t.Helper()
	var m modelTerms
	if err := f.db.QueryRowContext(context.Background(), `SELECT max_context_tokens, max_output_tokens FROM models WHERE name = $1`,
		r.Model).Scan(&m.maxContext, &m.maxOutput); err != nil {
		t.Fatal(err)
	}
	out, err := clampOutput(r, m)
	if err != nil {
		return -1
	}
	return out
}

// TestReserveFastDuplicateHoldsOnce: a second reservation under the same
// id fails the fast statement on the key and the hold it made is undone,
// so the team holds the estimate once.
func TestReserveFastDuplicateHoldsOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, dialects[0].dsn(t))
	team := f.team(t, "dup", 1_000_000)
	r := Reservation{RequestID: "dup-1", TeamID: team, Model: m8b, PromptTokens: 1000, MaxOutputTokens: 500}
	first, ok, err := f.l.reserveFast(ctx, r)
	if err != nil || !ok {
		t.Fatalf("first reserveFast: %v, %v", ok, err)
	}
	if _, ok, err := f.l.reserveFast(ctx, r); err != nil || ok {
		t.Fatalf("second reserveFast = %v, %v; want declined", ok, err)
	}
	again := f.reserve(t, r)
	if !again.Existing || again.Microcredits != first.Microcredits {
		t.Errorf("Reserve of the same id = %+v, want the existing %+v", again, first)
	}
	if got := f.balance(t, team).Reserved; got != first.Microcredits {
		t.Errorf("team holds %d, want %d once", got, first.Microcredits)
	}
	f.checkBooks(t)
}
