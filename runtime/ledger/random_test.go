package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// randomSeed fixes the randomized runs, so a failure replays exactly.
const randomSeed = 20300102

// terms are the test models' terms, the oracle's copy.
var terms = map[string]modelTerms{
	m8b:  {promptPrice: m8bPrompt, completionPrice: m8bOut, maxContext: m8bContext, maxOutput: m8bMaxOut},
	m70b: {promptPrice: 900_000, completionPrice: 2_700_000, maxContext: 32768, maxOutput: 8192},
}

// openReq is a reservation the oracle expects to be held.
type openReq struct {
	team           int64
	held           int64
	created        time.Time
	logged         bool // the completion log has it
	logUsage       Usage
	prompt, maxOut int64
	model          string
}

// oracle is the randomized run's own account of what the ledger must hold.
type oracle struct {
	balance, reserved map[int64]int64
	open              map[string]*openReq
	done              []string
	credits           map[string]int64 // idempotency key → amount
	seen              map[string]int   // how often each kind of event happened
}

func TestRandomizedSequential(t *testing.T) {
	const steps = 400
	forEachDialect(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(randomSeed, 1))
		teams := []int64{f.team(t, "a", 0), f.team(t, "b", 0), f.team(t, "c", 0)}
		o := &oracle{balance: map[int64]int64{}, reserved: map[int64]int64{}, open: map[string]*openReq{},
			credits: map[string]int64{}, seen: map[string]int{}}
		for step := range steps {
			team := teams[rng.IntN(len(teams))]
			switch op := rng.IntN(100); {
			case op < 12: // a grant, a correction, or a retried grant
				key, amount := fmt.Sprint("g-", step), rng.Int64N(40_000)+1
				if rng.IntN(5) == 0 {
					amount = -rng.Int64N(2_000) - 1
				}
				retry := false
				if len(o.credits) > 0 && rng.IntN(4) == 0 {
					key, retry = pickKey(rng, o.credits), true
				}
				var c Credit
				var err error
				if retry {
					c, err = f.l.AddCredit(ctx, creditTeam(t, f, key), key, o.credits[key], "")
				} else {
					c, err = f.l.AddCredit(ctx, team, key, amount, "")
				}
				if err != nil || c.Applied == retry {
					t.Fatalf("step %d: AddCredit = %+v, %v; want applied %t", step, c, err, !retry)
				}
				if !retry {
					o.credits[key], o.balance[team] = amount, o.balance[team]+amount
				}
				o.seen[fmt.Sprint("credit retried=", retry)]++
			case op < 50:
				o.reserve(t, f, rng, step, team)
			case op < 75:
				o.finish(t, f, rng, step, true)
			case op < 85:
				o.finish(t, f, rng, step, false)
			case op < 93:
				o.retry(t, f, rng, step)
			default:
				f.clock.Step(time.Duration(rng.Int64N(int64(20 * time.Minute))))
				o.sweep(t, f, step)
			}
			for _, tm := range teams {
				if b := f.balance(t, tm); b.Balance != o.balance[tm] || b.Reserved != o.reserved[tm] {
					t.Fatalf("step %d: team %d = %+v, want balance %d held %d", step, tm, b, o.balance[tm], o.reserved[tm])
				}
			}
		}
		f.clock.Step(DefaultSweepAfter + time.Second)
		o.sweep(t, f, steps)
		for _, tm := range teams {
			if b := f.balance(t, tm); b.Reserved != 0 || b.Balance != o.balance[tm] {
				t.Fatalf("after the last sweep team %d = %+v, want balance %d and nothing held", tm, b, o.balance[tm])
			}
		}
		var reserved int
		if err := f.db.QueryRow("SELECT COUNT(*) FROM usage_ledger WHERE status = 'reserved'").Scan(&reserved); err != nil || reserved != 0 {
			t.Fatalf("%d rows reserved (%v) after the last sweep, want 0", reserved, err)
		}
		f.checkBooks(t)
		t.Logf("events: %v", o.seen)
		for _, kind := range []string{"credit retried=false", "credit retried=true", "reserve", "refuse", "settle",
			"cancel", "retry", "sweep settled", "sweep cancelled"} {
			if o.seen[kind] == 0 {
				t.Errorf("the run had no %q event; change randomSeed or the mix", kind)
			}
		}
	})
}

// reserve makes a random reservation and checks it against the oracle.
func (o *oracle) reserve(t *testing.T, f *fixture, rng *rand.Rand, step int, team int64) {
	t.Helper()
	model := []string{m8b, m70b}[rng.IntN(2)]
	m := terms[model]
	r := Reservation{RequestID: fmt.Sprint("r-", step), TeamID: team, Model: model,
		PromptTokens: rng.Int64N(3000) + 1, MaxOutputTokens: rng.Int64N(1500)}
	available := o.balance[team] - o.reserved[team]
	capped := min(m.maxOutput, m.maxContext-r.PromptTokens)
	if r.MaxOutputTokens > 0 {
		capped = min(capped, r.MaxOutputTokens)
	}
	full := Cost(r.PromptTokens, capped, m.promptPrice, m.completionPrice)
	minimum := full
	if r.MaxOutputTokens == 0 {
		minimum = Cost(r.PromptTokens, 1, m.promptPrice, m.completionPrice)
	}
	got, err := f.l.Reserve(context.Background(), r)
	if minimum > available {
		if !errors.Is(err, ErrInsufficientBalance) {
			t.Fatalf("step %d: Reserve(%+v) with %d available = %+v, %v; want ErrInsufficientBalance", step, r, available, got, err)
		}
		o.seen["refuse"]++
		return
	}
	if err != nil || got.Microcredits > available || got.MaxOutputTokens < 1 || got.MaxOutputTokens > capped ||
		got.Microcredits != Cost(r.PromptTokens, got.MaxOutputTokens, m.promptPrice, m.completionPrice) ||
		(full <= available && got.Microcredits != full) {
		t.Fatalf("step %d: Reserve(%+v) with %d available = %+v, %v; want at most %d", step, r, available, got, err, full)
	}
	req := &openReq{team: team, held: got.Microcredits, created: f.clock.Now(), prompt: r.PromptTokens,
		maxOut: got.MaxOutputTokens, model: model}
	if rng.IntN(2) == 0 {
		req.logged, req.logUsage = true, Usage{PromptTokens: r.PromptTokens, CompletionTokens: rng.Int64N(got.MaxOutputTokens + 1)}
		f.log.report(r.RequestID, req.logUsage)
	}
	o.open[r.RequestID] = req
	o.reserved[team] += got.Microcredits
	o.seen["reserve"]++
}

// finish settles (exactly, partially or beyond the hold) or cancels a
// random open request.
func (o *oracle) finish(t *testing.T, f *fixture, rng *rand.Rand, step int, settle bool) {
	t.Helper()
	if len(o.open) == 0 {
		return
	}
	id := pickKey(rng, o.open)
	req := o.open[id]
	var out Outcome
	var err error
	var wantCost int64
	if settle {
		u, src := Usage{PromptTokens: req.prompt, CompletionTokens: rng.Int64N(req.maxOut + 1)}, SourceExact
		switch rng.IntN(4) {
		case 0:
			u.CompletionTokens, src = u.CompletionTokens/3, SourcePartial
		case 1:
			u.PromptTokens, u.CompletionTokens = 2*req.prompt, req.maxOut+50 // more than the estimate
		}
		m := terms[req.model]
		wantCost = min(Cost(u.PromptTokens, u.CompletionTokens, m.promptPrice, m.completionPrice), req.held)
		out, err = f.l.Settle(context.Background(), id, u, src)
	} else {
		out, err = f.l.Cancel(context.Background(), id)
	}
	if err != nil || !out.Applied || out.CostMicrocredits != wantCost {
		t.Fatalf("step %d: finishing %s = %+v, %v; want applied at %d", step, id, out, err, wantCost)
	}
	o.close(id, wantCost)
	o.seen[map[bool]string{true: "settle", false: "cancel"}[settle]]++
}

// retry repeats a settle or cancel of a finished request: it must change
// nothing.
func (o *oracle) retry(t *testing.T, f *fixture, rng *rand.Rand, step int) {
	t.Helper()
	if len(o.done) == 0 {
		return
	}
	id := o.done[rng.IntN(len(o.done))]
	out, err := f.l.Settle(context.Background(), id, Usage{PromptTokens: 99, CompletionTokens: 99}, SourceExact)
	if rng.IntN(2) == 0 {
		out, err = f.l.Cancel(context.Background(), id)
	}
	if err != nil || out.Applied {
		t.Fatalf("step %d: retrying %s = %+v, %v; want unapplied", step, id, out, err)
	}
	o.seen["retry"]++
}

// sweep runs a sweep and checks it moved exactly the stale rows.
func (o *oracle) sweep(t *testing.T, f *fixture, step int) {
	t.Helper()
	cutoff := f.clock.Now().Add(-DefaultSweepAfter)
	var want SweepResult
	costs := map[string]int64{}
	for id, req := range o.open {
		if !req.created.Before(cutoff) {
			continue
		}
		if req.logged {
			want.Settled++
			m := terms[req.model]
			costs[id] = min(Cost(req.logUsage.PromptTokens, req.logUsage.CompletionTokens, m.promptPrice, m.completionPrice), req.held)
		} else {
			want.Cancelled++
			costs[id] = 0
		}
	}
	got, err := f.l.Sweep(context.Background())
	if err != nil || got != want {
		t.Fatalf("step %d: Sweep = %+v, %v; want %+v", step, got, err, want)
	}
	for id, cost := range costs {
		o.close(id, cost)
	}
	o.seen["sweep settled"] += got.Settled
	o.seen["sweep cancelled"] += got.Cancelled
}

// close records that id left 'reserved' at cost.
func (o *oracle) close(id string, cost int64) {
	req := o.open[id]
	o.reserved[req.team] -= req.held
	o.balance[req.team] -= cost
	delete(o.open, id)
	o.done = append(o.done, id)
}

// creditTeam returns the team a credit entry was recorded for.
func creditTeam(t *testing.T, f *fixture, key string) int64 {
	t.Helper()
	var team int64
	if err := f.db.QueryRow("SELECT team_id FROM credit_entries WHERE idempotency_key = $1", key).Scan(&team); err != nil {
		t.Fatal(err)
	}
	return team
}

// pickKey returns a random key of m, deterministically for a given rng.
func pickKey[V any](rng *rand.Rand, m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[rng.IntN(len(keys))]
}
