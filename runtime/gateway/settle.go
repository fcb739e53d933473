package gateway

import (
	"context"
	"errors"
	"k8s.io/utils/clock"
	"time"

	"github.com/llmplat/llmplat/runtime/ledger"
)

// keepTimeout bounds keeping a settle in the settle log.
const keepTimeout = 2 * time.Second

// keep saves a settle the database refused for the settle log's replayer
// (tokens were delivered: they must be billed once the database is back),
// and a refused cancel too: the team's credit comes back as soon as the
// database does, not at the sweeper's window.
func (s *Server) keep(a *admission, b bill, cause error) {
	if s.cfg.Settles == nil {
		s.cfg.Logger.Error("settle failed; the sweeper will close the row", "request_id", a.requestID, "err", cause)
		return
	}
	u, src := b.usage, b.src
	if !b.settle {
		// A cancel is kept as what it is: a settle of nothing produced,
		// which the ledger turns into a cancel when it is replayed.
		u, src = ledger.Usage{}, ledger.SourcePartial
	}
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	if err := s.cfg.Settles.Keep(ctx, a.requestID, u, src); err != nil {
		s.cfg.Logger.Error("settle failed and could not be kept; the sweeper will close the row from the node's counts, if any",
			"request_id", a.requestID, "err", cause, "keep_err", err)
		return
	}
	s.cfg.Logger.Warn("settle failed; kept for replay when the database is back", "request_id", a.requestID, "err", cause,
		"prompt_tokens", u.PromptTokens, "completion_tokens", u.CompletionTokens)
}

// finish ends a's ledger row as b says — settled with its usage, or
// cancelled — then, when count is set (the limits' round trip failed), counts
// the settled tokens on the key's day. Settle is idempotent, so a retry
// after a blip cannot debit twice; a settle the database refuses is kept
// for replay (keep).
//
// Its budget is its own, detached from the request's context so that a
// settle outlives the client: settleTimeout, cut short when the gateway
// shuts down (Serve ends s.settling). Either way a settle not done is kept
// before it returns. Attempts are settleAttempts, paced by
// settleRetryPause; the pause ends with the budget, and none follows the
// last attempt.
func (s *Server) finish(a *admission, b bill, count bool) {
	u, src, settle := b.usage, b.src, b.settle
	ctx, cancel := context.WithTimeout(s.settling, settleTimeout)
	defer cancel()
	var (
		o   ledger.Outcome
		err error
	)
	for attempt := 1; ; attempt++ {
		if ts, ok := s.cfg.Ledger.(TimedSettler); settle && ok && a.timing != nil {
			o, err = ts.SettleTimed(ctx, a.requestID, u, src, *a.timing)
		} else if settle {
			o, err = s.cfg.Ledger.Settle(ctx, a.requestID, u, src)
		} else {
			o, err = s.cfg.Ledger.Cancel(ctx, a.requestID)
		}
		if err == nil || errors.Is(err, ledger.ErrNotFound) || attempt >= settleAttempts ||
			ctx.Err() != nil || !s.pause(ctx, settleRetryPause) {
			break
		}
	}
	if !settle && errors.Is(err, ledger.ErrNotFound) {
		return // a cancel of a reservation that was never made
	}
	if err != nil {
		s.keep(a, b, err)
		return
	}
	if o.Status != "settled" {
		return
	}
	if o.Applied {
		s.cfg.Metrics.settled(a.model, a.p.TeamName, o.CostMicrocredits, o.Usage)
		if o.Capped || b.corrected&ledger.OverReserved != 0 {
			s.cfg.Metrics.settleCapped(a.model)
		}
		if o.Corrected != 0 {
			// The ledger's own bound, on a row whose terms differ from
			// the gateway's view of it: counted here, logged there.
			s.cfg.Metrics.usageCorrected(a.model, o.Corrected)
		}
	}
	if !count || a.p.Limits.TokensPerDay <= 0 {
		return // counted already, or no daily limit: nothing to count
	}
	// Counted once per request, whoever settled the row: a settle whose
	// commit acknowledgement was lost, retried here, finds it settled
	// (not applied) and still counts.
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	if _, err := s.cfg.Limits.CountTokens(rctx, a.p.QuotaID(), a.requestID, o.Usage.PromptTokens+o.Usage.CompletionTokens); err != nil {
		s.cfg.Logger.Warn("tokens-per-day counter not updated", "request_id", a.requestID, "err", err)
	}
}

// pauseFor waits d on clk, or until ctx ends; it reports whether d passed.
func pauseFor(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
