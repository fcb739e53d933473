package gateway

import (
	"k8s.io/utils/clock"
	"sync"
	"time"

	"github.com/llmplat/llmplat/runtime/ledger"
)

// Whether a request may reserve while its engine prefills, each with its
// reason.
const (
	// earlyHeadroom is how many times over the team's recently seen
	// available balance (less what this replica's own unconfirmed early
	// reservations hold) must cover a request's worst-case cost before the
	// request goes to its engine ahead of its reservation: other replicas'
	// holds since the view are unseen, and a refusal after dispatch costs
	// the engine's prefill.
	earlyHeadroom = 16
	// balanceViewTTL is how long a team's seen balance is trusted: a few
	// seconds of other replicas' traffic, at most, is unseen; a team with
	// no request for longer reserves first again.
	balanceViewTTL = 2 * time.Second
)

// balanceView is this replica's recent view of teams' available balances,
// taken from its own reservations' answers (ledger.Reserved.Available).
// It only ever decides the order of the reservation and the dispatch: the
// ledger's reservation decides whether the request runs. Its map holds one
// small entry per team that sent a request, a set the platform team
// declares.
type balanceView struct {
	clock clock.PassiveClock

	mu    sync.Mutex
	teams map[int64]*teamBalance
}

// teamBalance is one team's seen available balance.
type teamBalance struct {
	available int64     // as the last reservation answered
	at        time.Time // when that answer came
	pending   int64     // held by this replica's unconfirmed early reservations
}

func newBalanceView(clk clock.PassiveClock) *balanceView {
	return &balanceView{clock: clk, teams: map[int64]*teamBalance{}}
}

// claim reports whether a request of team that may cost est may reserve
// while its engine prefills: the team's seen balance is recent and, less
// what is pending, at least earlyHeadroom times est. A claim counts est as
// pending until observe ends it.
func (v *balanceView) claim(team, est int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	tb := v.teams[team]
	if tb == nil || v.clock.Now().Sub(tb.at) >= balanceViewTTL || est < 0 {
		return false
	}
	free := tb.available - tb.pending
	if free <= 0 || est > free/earlyHeadroom {
		return false
	}
	tb.pending += est
	return true
}

// observe takes a reservation's answer for team into the view, ending a
// claim of claimed (0: the request reserved first). A refusal for the
// balance marks the team as having nothing to spare.
func (v *balanceView) observe(team, claimed int64, res ledger.Reserved, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	tb := v.teams[team]
	if tb == nil {
		tb = &teamBalance{}
		v.teams[team] = tb
	}
	tb.pending -= claimed
	switch {
	case err == nil && !res.Existing:
		tb.available, tb.at = res.Available, v.clock.Now()
	case isBalanceRefusal(err):
		tb.available, tb.at = 0, v.clock.Now()
	}
}
