package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestBatchesMatchThePrecisePath: concurrent reservations and settles,
// combined into batches, give each request exactly what the one-request
// paths give it alone: the same hold and output cap, the same refusals
// (unknown model, prompt too long), the same cost, status, usage, cap flag
// and corrections under the bound and the partial rule; and the books
// balance.
func TestBatchesMatchThePrecisePath(t *testing.T) {
	batched := newFixture(t, testenv.Postgres(t))
	precise := newFixture(t, testenv.Postgres(t))
	precise.l = precise.ledger(t, Config{NoBatching: true})
	if batched.l.reserves == nil || precise.l.reserves != nil {
		t.Fatal("the fixtures do not differ in batching")
	}
	const n = 400
	rng := rand.New(rand.NewPCG(7, 9))
	teamsB := []int64{batched.team(t, "a", 1e12), batched.team(t, "b", 1e12), batched.team(t, "c", 1e12)}
	teamsP := []int64{precise.team(t, "a", 1e12), precise.team(t, "b", 1e12), precise.team(t, "c", 1e12)}
	type step struct {
		r      Reservation
		team   int
		settle bool
		src    Source
		u      Usage
	}
	steps := make([]step, n)
	for i := range steps {
		s := &steps[i]
		s.team = rng.IntN(3)
		s.r = Reservation{RequestID: fmt.Sprint("q", i), Model: m8b, PromptTokens: rng.Int64N(2000), MaxOutputTokens: rng.Int64N(900)}
		switch rng.IntN(20) {
		case 0:
			s.r.Model = "no-such-model"
		case 1:
			s.r.PromptTokens = m8bContext + 5
		case 2:
			s.r.Model = m70b
		}
		s.settle = rng.IntN(4) > 0
		s.src = []Source{SourceExact, SourcePartial, SourceNodeLog}[rng.IntN(3)]
		s.u = Usage{PromptTokens: rng.Int64N(2) * rng.Int64N(2500), CompletionTokens: rng.Int64N(2) * rng.Int64N(1200)}
		switch rng.IntN(10) { // a hostile or broken report, bounded alike (BoundUsage)
		case 0:
			s.u.PromptTokens = -1 - s.u.PromptTokens
		case 1:
			s.u.CompletionTokens = -huge
		case 2:
			s.u.PromptTokens, s.u.CompletionTokens = huge, huge
		}
	}
	type result struct {
		res  Reserved
		rerr error
		out  Outcome
		ferr error
	}
	run := func(f *fixture, teams []int64, concurrent bool) []result {
		out := make([]result, n)
		one := func(i int) {
			s := steps[i]
			r := s.r
			r.TeamID = teams[s.team]
			out[i].res, out[i].rerr = f.l.Reserve(context.Background(), r)
			if out[i].rerr != nil {
				return
			}
			if s.settle {
				out[i].out, out[i].ferr = f.l.Settle(context.Background(), r.RequestID, s.u, s.src)
			} else {
				out[i].out, out[i].ferr = f.l.Cancel(context.Background(), r.RequestID)
			}
		}
		if concurrent {
			runTogether(n, one)
		} else {
			for i := range n {
				one(i)
			}
		}
		return out
	}
	got, want := run(batched, teamsB, true), run(precise, teamsP, false)
	for i := range n {
		g, w := got[i], want[i]
		if (g.rerr == nil) != (w.rerr == nil) || (g.rerr != nil && !sameKind(g.rerr, w.rerr)) {
			t.Errorf("%s: reserve error %v, precise %v", steps[i].r.RequestID, g.rerr, w.rerr)
			continue
		}
		if g.rerr != nil {
			continue
		}
		// Available is the team's balance as the committing statement saw
		// it: after the whole batch's holds, so it differs by design.
		g.res.Available, w.res.Available = 0, 0
		if g.res != w.res {
			t.Errorf("%s: reserved %+v, precise %+v", steps[i].r.RequestID, g.res, w.res)
		}
		if g.ferr != nil || w.ferr != nil {
			t.Errorf("%s: finish errors %v, %v", steps[i].r.RequestID, g.ferr, w.ferr)
			continue
		}
		g.out.TeamID, w.out.TeamID = 0, 0 // the fixtures' ids may differ
		if g.out != w.out {
			t.Errorf("%s: finished %+v, precise %+v", steps[i].r.RequestID, g.out, w.out)
		}
	}
	batched.checkBooks(t)
	precise.checkBooks(t)
	for i := range teamsB {
		if b, p := batched.balance(t, teamsB[i]), precise.balance(t, teamsP[i]); b.Balance != p.Balance || b.Reserved != 0 {
			t.Errorf("team %d: batched %+v, precise %+v", i, b, p)
		}
	}
	// The batches did the work (a refusal alone takes the precise path),
	// and combined requests.
	for _, c := range []struct {
		name                    string
		batches, calls, handled int64
	}{
		{"reserve", batched.l.reserves.batches.Load(), batched.l.reserves.calls.Load(), batched.l.reserves.handled.Load()},
		{"finish", batched.l.finishes.batches.Load(), batched.l.finishes.calls.Load(), batched.l.finishes.handled.Load()},
	} {
		if c.batches >= c.calls || c.handled < c.calls*8/10 {
			t.Errorf("%s: %d batches for %d calls, %d handled by a batch; want fewer batches than calls, most handled",
				c.name, c.batches, c.calls, c.handled)
		}
	}
}

// sameKind reports whether two ledger errors are the same refusal.
func sameKind(a, b error) bool {
	for _, e := range []error{ErrUnknownModel, ErrContextTooLong, ErrInsufficientBalance, ErrUnknownTeam} {
		if errors.Is(a, e) || errors.Is(b, e) {
			return errors.Is(a, e) && errors.Is(b, e)
		}
	}
	return false
}

// TestBurstAcrossTwoGateways: two gateway processes' ledgers (their own
// connection pools and batches) take a burst of 300 reservations of one
// team whose balance covers 110: exactly 110 are held, never more than the
// balance, the rest refused for the balance. One gateway then crashes with
// its reservations open; the other settles its own. The sweeper of a third
// releases every hold the crashed one left, and the books balance.
func TestBurstAcrossTwoGateways(t *testing.T) {
	dsn := testenv.Postgres(t)
	f := newFixture(t, dsn)
	second, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	a := f.l
	b, err := New(second, Config{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	const burst, affordable = 300, 110
	team := f.team(t, "burst", affordable*hold+hold/2)
	errs := make([]error, burst)
	var mu sync.Mutex
	heldBy := map[string]*Ledger{}
	runTogether(burst, func(i int) {
		l := a
		if i%2 == 1 {
			l = b
		}
		id := fmt.Sprint("burst-", i)
		_, errs[i] = l.Reserve(context.Background(), req(id, team))
		if errs[i] == nil {
			mu.Lock()
			heldBy[id] = l
			mu.Unlock()
		}
	})
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrInsufficientBalance):
			t.Fatalf("request %d: %v, want nil or ErrInsufficientBalance", i, err)
		}
	}
	if ok != affordable {
		t.Fatalf("%d reservations held, want the %d the balance covers", ok, affordable)
	}
	if bal := f.balance(t, team); bal.Reserved != affordable*hold || bal.Available < 0 {
		t.Fatalf("balance %+v, want %d held and nothing overspent", bal, affordable*hold)
	}
	f.checkBooks(t)

	// Gateway a crashes: its holds stay open. Gateway b settles its own.
	var settled int64
	var ids []string
	for id, l := range heldBy {
		if l == b {
			ids = append(ids, id)
		}
	}
	runTogether(len(ids), func(i int) {
		out, err := b.Settle(context.Background(), ids[i], Usage{PromptTokens: 900, CompletionTokens: 100}, SourceExact)
		if err != nil || !out.Applied {
			t.Errorf("settle %s: %+v, %v", ids[i], out, err)
		}
	})
	settled = int64(len(ids)) * Cost(900, 100, m8bPrompt, m8bOut)
	f.checkBooks(t)

	// The sweeper of a gateway that outlived them releases every hold the
	// crashed one left (nothing in the completion log: cancelled).
	f.clock.Step(DefaultSweepAfter + time.Minute)
	if _, err := f.ledger(t, Config{}).Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	bal := f.balance(t, team)
	if bal.Reserved != 0 || bal.Balance != affordable*hold+hold/2-settled {
		t.Fatalf("after the sweep: %+v, want nothing held and only b's settles debited (%d)", bal, settled)
	}
	f.checkBooks(t)
	for id, l := range heldBy {
		want := StatusSettled
		if l == a {
			want = StatusCancelled
		}
		if got := f.status(t, id); got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
}

// TestBatchersRunOneBatchAtATime: a ledger's reservation and settle
// batchers share one mutex, so their batches, which lock the same team
// rows, never run side by side; every call still gets its own result.
func TestBatchersRunOneBatchAtATime(t *testing.T) {
	var mu sync.Mutex
	var running, most, batches int64
	var cmu sync.Mutex
	run := func(calls []*call[int, int]) {
		cmu.Lock()
		running++
		most = max(most, running)
		batches++
		cmu.Unlock()
		time.Sleep(time.Millisecond) // a statement takes a while: let the other kind try to start
		for _, c := range calls {
			c.out, c.ok = c.in*2, true
		}
		cmu.Lock()
		running--
		cmu.Unlock()
	}
	a := &batcher[int, int]{serial: &mu, run: func(_ context.Context, calls []*call[int, int]) { run(calls) }}
	b := &batcher[int, int]{serial: &mu, run: func(_ context.Context, calls []*call[int, int]) { run(calls) }}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bt := a
			if i%2 == 1 {
				bt = b
			}
			out, ok, err := bt.do(t.Context(), i)
			if err != nil || !ok || out != i*2 {
				t.Errorf("call %d: got (%d, %v, %v), want (%d, true, nil)", i, out, ok, err, i*2)
			}
		}()
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("at most %d batches ran at once, want 1", most)
	}
	if batches < 2 {
		t.Errorf("%d batches ran, want both batchers to have run", batches)
	}
}

// TestLedgerBatchersShareTheirMutex: New wires both batchers to the
// ledger's one mutex.
func TestLedgerBatchersShareTheirMutex(t *testing.T) {
	l := newFixture(t, testenv.Postgres(t)).l
	if l.reserves == nil || l.finishes == nil {
		t.Fatal("a PostgreSQL ledger has no batchers")
	}
	if l.reserves.serial == nil || l.reserves.serial != l.finishes.serial {
		t.Errorf("the batchers' mutexes are %p and %p, want one shared", l.reserves.serial, l.finishes.serial)
	}
}
