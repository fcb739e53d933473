package gateway

import (
	"errors"
	"fmt"
	testingclock "k8s.io/utils/clock/testing"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/ledger"
)

// TestBalanceView: a request may go ahead of its reservation only while
// the team's seen balance is fresh and covers it earlyHeadroom times over,
// less what this replica's unconfirmed early reservations hold; a refusal
// for the balance, or time, closes the way.
func TestBalanceView(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	v := newBalanceView(clk)
	const team = 7
	step := func(what string, got, want bool) {
		t.Helper()
		if got != want {
			t.Errorf("%s: claim = %v, want %v", what, got, want)
		}
	}
	step("a team never seen", v.claim(team, 1), false)
	v.observe(team, 0, ledger.Reserved{Available: 1600}, nil)
	step("covered exactly 16 times", v.claim(team, 100), true)
	step("the first claim still pending", v.claim(team, 100), false) // 1500 left: 93 each
	step("a smaller one fits beside it", v.claim(team, 93), true)
	v.observe(team, 100, ledger.Reserved{Available: 1500}, nil)
	v.observe(team, 93, ledger.Reserved{Available: 1407}, nil)
	step("both confirmed", v.claim(team, 87), true)
	v.observe(team, 87, ledger.Reserved{Available: 1320}, nil)
	step("another team", v.claim(team+1, 1), false)
	step("a negative estimate", v.claim(team, -1), false)

	v.observe(team, 0, ledger.Reserved{Available: 1 << 40, Existing: true}, nil)
	step("a replayed reservation says nothing of the balance", v.claim(team, 1<<30), false)

	clk.SetTime(clk.Now().Add(balanceViewTTL))
	step("a view as old as its TTL", v.claim(team, 1), false)
	v.observe(team, 0, ledger.Reserved{Available: 1600}, nil)
	step("fresh again", v.claim(team, 1), true)
	v.observe(team, 1, ledger.Reserved{}, fmt.Errorf("reserve: %w", ledger.ErrInsufficientBalance))
	step("after a refusal for the balance", v.claim(team, 1), false)
	v.observe(team, 0, ledger.Reserved{Available: 1600}, nil)
	v.observe(team, 0, ledger.Reserved{}, errors.New("database down"))
	step("another error leaves the view", v.claim(team, 100), true)
}
