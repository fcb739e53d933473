package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// hold is the estimate of req: 1,000 prompt and 500 output tokens of m8b.
const hold = 500

func TestSettleDebitsOnce(t *testing.T) {
	u := Usage{PromptTokens: 800, CompletionTokens: 420}
	cost := Cost(u.PromptTokens, u.CompletionTokens, m8bPrompt, m8bOut)
	tests := []struct {
		name        string
		calls       int
		concurrency bool
	}{
		{name: "three times in a row", calls: 3},
		{name: "twenty at once", calls: 20, concurrency: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachDialect(t, func(t *testing.T, f *fixture) {
				team := f.team(t, "a", 10_000)
				f.reserve(t, req("r1", team))
				outs := make([]Outcome, tt.calls)
				errs := make([]error, tt.calls)
				settle := func(i int) { outs[i], errs[i] = f.l.Settle(context.Background(), "r1", u, SourceExact) }
				if tt.concurrency {
					runTogether(tt.calls, settle)
				} else {
					for i := range tt.calls {
						settle(i)
					}
				}
				applied := 0
				for i, out := range outs {
					if errs[i] != nil {
						t.Fatalf("call %d: %v", i, errs[i])
					}
					if out.Applied {
						applied++
					}
					if out.Status != StatusSettled || out.CostMicrocredits != cost {
						t.Errorf("call %d = %+v, want settled at %d", i, out, cost)
					}
				}
				if applied != 1 {
					t.Fatalf("%d calls applied, want 1", applied)
				}
				if b := f.balance(t, team); b.Balance != 10_000-cost || b.Reserved != 0 {
					t.Fatalf("balance = %+v, want one debit of %d", b, cost)
				}
				f.checkBooks(t)
			})
		})
	}
}

func TestSettleRacesCancel(t *testing.T) {
	const rounds = 10
	u := Usage{PromptTokens: 1000, CompletionTokens: 200}
	cost := Cost(u.PromptTokens, u.CompletionTokens, m8bPrompt, m8bOut)
	forEachDialect(t, func(t *testing.T, f *fixture) {
		team := f.team(t, "a", 100_000)
		var debits int64
		for round := range rounds {
			id := fmt.Sprint("race-", round)
			f.reserve(t, req(id, team))
			var settled, cancelled Outcome
			var errS, errC error
			runTogether(2, func(i int) {
				if i == 0 {
					settled, errS = f.l.Settle(context.Background(), id, u, SourceExact)
				} else {
					cancelled, errC = f.l.Cancel(context.Background(), id)
				}
			})
			if errS != nil || errC != nil {
				t.Fatalf("round %d: settle %v, cancel %v", round, errS, errC)
			}
			if settled.Applied == cancelled.Applied {
				t.Fatalf("round %d: settle applied %t, cancel applied %t; want exactly one", round, settled.Applied, cancelled.Applied)
			}
			if settled.Status != cancelled.Status || settled.CostMicrocredits != cancelled.CostMicrocredits {
				t.Fatalf("round %d: the two calls saw different rows: %+v, %+v", round, settled, cancelled)
			}
			if settled.Applied {
				debits += cost
			}
			if b := f.balance(t, team); b.Balance != 100_000-debits || b.Reserved != 0 {
				t.Fatalf("round %d: balance = %+v, want %d", round, b, 100_000-debits)
			}
		}
		f.checkBooks(t)
	})
}

func TestConcurrentReserveNeverOverspends(t *testing.T) {
	const callers = 50
	tests := []struct {
		name       string
		credit     int64
		affordable int
	}{
		{name: "covers seventeen and a half", credit: 17*hold + hold/2, affordable: 17},
		{name: "covers all exactly", credit: callers * hold, affordable: callers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachDialect(t, func(t *testing.T, f *fixture) {
				team := f.team(t, "a", tt.credit)
				errs := make([]error, callers)
				var done atomic.Bool
				var low, seen int64 = tt.credit, 0
				observed := make(chan struct{})
				go func() { // watches the balance while the reservations run
					defer close(observed)
					for !done.Load() {
						if b, err := f.l.Balance(context.Background(), team); err == nil {
							low, seen = min(low, b.Available), seen+1
						}
					}
				}()
				runTogether(callers, func(i int) {
					_, errs[i] = f.l.Reserve(context.Background(), req(fmt.Sprint("c-", i), team))
				})
				done.Store(true)
				<-observed
				if seen == 0 || low < 0 {
					t.Errorf("available went down to %d over %d reads while reserving, want ≥ 0 over some", low, seen)
				}
				ok := 0
				for i, err := range errs {
					switch {
					case err == nil:
						ok++
					case !errors.Is(err, ErrInsufficientBalance):
						t.Errorf("caller %d: %v, want nil or ErrInsufficientBalance", i, err)
					}
				}
				if ok != tt.affordable {
					t.Fatalf("%d reservations succeeded, want the %d affordable", ok, tt.affordable)
				}
				b := f.balance(t, team)
				if want := int64(tt.affordable) * hold; b.Reserved != want || b.Available != tt.credit-want {
					t.Fatalf("balance = %+v, want %d held", b, want)
				}
				f.checkBooks(t)
			})
		})
	}
}

// runTogether runs fn(0) … fn(n-1) on n goroutines released at once, and
// waits for them.
func runTogether(n int, fn func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}
