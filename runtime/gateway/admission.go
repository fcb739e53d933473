package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// admission is an admitted request: what was granted and must be given
// back or settled.
type admission struct {
	p         auth.Principal
	requestID string
	model     string
	// slot is set when a stream slot was taken and must be released.
	slot bool
	// promptEstimate is the reserved prompt count, used for a partial
	// settle when the engine's usage never arrived.
	promptEstimate int64
	// tokensLeft is what the key's day has left at admission; -1 when the
	// key has no tokens_per_day.
	tokensLeft int64
	reserved   ledger.Reserved
	// early carries the answer of a reservation that runs while the
	// engine prefills (reserveEarly); confirm takes it and keeps a refusal
	// in refused.
	early   chan reserveAnswer
	refused *rejection
	// limitsTried and limitsEnded: endLimitsNow ran, and whether it
	// worked.
	limitsTried, limitsEnded bool
}

// admit checks the key's limits, then reserves in the ledger. The limits
// take one Redis round trip (quota.Limiter.Admit): the stream slot, the
// day's tokens (read only), then requests per minute (the one check that
// cannot be undone, so it runs last), and a refusal there holds nothing:
// no request the limits refuse costs GPU time. The reservation in
// PostgreSQL comes next, and its refusal gives the slot back.
//
// When the team's recently seen balance covers the request many times over
// (balanceView.claim), the reservation is only started here, on the
// ledger's quote of the cap (ledger.Ledger.Quote): the request goes to its
// engine while the reservation commits, and confirm waits for it before
// anything of the answer reaches the client.
func (s *Server) admit(c *gin.Context, ctx context.Context, p auth.Principal, req *openai.ChatCompletionRequest) (*admission, *rejection) {
	a := &admission{p: p, requestID: requestIDOf(c), model: req.Model, tokensLeft: -1}
	if r := s.checkLimits(c, ctx, p, a); r != nil {
		return nil, r
	}
	a.promptEstimate = tokens.EstimateRequest(req)
	asked := keyCap(req.MaxOutputTokens(), p.Limits.MaxTokens)
	r := ledger.Reservation{
		RequestID: a.requestID, TeamID: p.TeamID, KeyID: p.KeyID, Model: req.Model,
		PromptTokens: a.promptEstimate, MaxOutputTokens: dayCap(asked, a.tokensLeft, a.promptEstimate),
	}
	// The quote and the reservation share one budget: a frozen database
	// must not hold the client (LedgerTimeout).
	deadline := time.Now().Add(s.cfg.LedgerTimeout)
	if s.reserveEarly(ctx, deadline, a, r) {
		return a, nil
	}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	res, err := s.cfg.Ledger.Reserve(rctx, r)
	cancel()
	s.balances.observe(p.TeamID, 0, res, err)
	if rej := s.held(ctx, a, res, err); rej != nil {
		return nil, rej
	}
	return a, nil
}

// reserveEarly starts r's reservation without waiting for it, when the
// ledger quotes r and the team's seen balance covers the quote many times
// over; it reports whether it did. The engine is then told the quoted cap,
// and r asks for exactly it: should the balance have shrunk meanwhile, the
// ledger refuses (402) rather than shrink a cap the engine already has.
// The quote and the reservation run on the request's context, until
// deadline; confirm receives the reservation's answer, on every path.
func (s *Server) reserveEarly(ctx context.Context, deadline time.Time, a *admission, r ledger.Reservation) bool {
	if s.cfg.Quoter == nil {
		return false
	}
	qctx, cancel := context.WithDeadline(ctx, deadline)
	q, err := s.cfg.Quoter.Quote(qctx, r)
	cancel()
	if err != nil || !s.balances.claim(r.TeamID, q.Microcredits) {
		// A refused quote (unknown model, prompt too long) is the ledger's
		// to answer, on its own fresh terms.
		return false
	}
	r.MaxOutputTokens = q.MaxOutputTokens
	a.reserved = q // the cap the engine is told; confirm replaces it
	a.early = make(chan reserveAnswer, 1)
	go func() {
		rctx, cancel := context.WithDeadline(ctx, deadline)
		res, err := s.cfg.Ledger.Reserve(rctx, r)
		cancel()
		s.balances.observe(r.TeamID, q.Microcredits, res, err)
		a.early <- reserveAnswer{res, err}
	}()
	return true
}

// reserveAnswer is the ledger's answer to an early reservation.
type reserveAnswer struct {
	res ledger.Reserved
	err error
}

// confirm waits for an early reservation's answer (once; later calls
// repeat the first's result) and returns the refusal to answer the client
// with when the ledger did not hold the request; held has then given back
// what admission took. Without an early reservation it returns nil.
func (s *Server) confirm(ctx context.Context, a *admission) *rejection {
	if a.early == nil {
		return a.refused
	}
	ans := <-a.early
	a.early = nil
	a.refused = s.held(ctx, a, ans.res, ans.err)
	s.cfg.Metrics.earlyReservation(a.refused == nil)
	return a.refused
}

// held takes a reservation's answer: the row held, or a refusal after the
// stream slot was given back and a row the ledger may have committed
// cancelled.
func (s *Server) held(ctx context.Context, a *admission, res ledger.Reserved, err error) *rejection {
	if err != nil {
		s.giveBackSlot(context.WithoutCancel(ctx), a)
		if !isRefusal(err) {
			// The reservation may have committed with its answer lost (a
			// dropped connection, the client gone mid-commit, a frozen
			// database's batch that may yet commit: ledger.ErrOutcomeUnknown):
			// cancel it, idempotently, rather than hold the team's credit
			// until the sweeper's window. In the background, as a settle:
			// the client's 503 does not wait on the database that failed.
			s.bg.Add(1)
			go func() {
				defer s.bg.Done()
				s.finish(a, ledger.Usage{}, "", false, false, 0)
			}()
		}
		return reserveRejection(err)
	}
	a.reserved = res
	s.cfg.Metrics.reserved(a.model, a.p.TeamName, res.Microcredits)
	return nil
}

// checkLimits applies the key's limits in one round trip, marks the slot
// taken, and sets the x-ratelimit-* headers of the limits it passed.
func (s *Server) checkLimits(c *gin.Context, ctx context.Context, p auth.Principal, a *admission) *rejection {
	lim := quota.KeyLimits{MaxStreams: p.Limits.MaxStreams, TokensPerDay: p.Limits.TokensPerDay, RPM: p.Limits.RPM}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	d, err := s.cfg.Limits.Admit(rctx, p.QuotaID(), a.requestID, lim)
	cancel()
	if errors.Is(err, quota.ErrInvalidName) {
		// Quota identities are derived (auth.Principal.QuotaID), never the
		// caller's text: this is a platform bug, not an outage to retry.
		s.cfg.Logger.Error("quota identity refused", "request_id", a.requestID, "err", err)
		return reject(http.StatusInternalServerError, "internal", openai.TypeServer, "internal_error", "",
			"the platform could not apply this caller's limits")
	}
	if err != nil {
		return unavailable("quota")
	}
	if d.Allowed {
		s.cfg.Metrics.quotaAdmitted(d.OnTicket)
	}
	if lim.TokensPerDay > 0 && d.Refused != quota.LimitStreams && d.Refused != quota.LimitTokensPerDay {
		c.Header("X-Ratelimit-Limit-Tokens", strconv.FormatInt(lim.TokensPerDay, 10))
		c.Header("X-Ratelimit-Remaining-Tokens", strconv.FormatInt(d.TokensRemaining, 10))
	}
	if lim.RPM > 0 && (d.Allowed || d.Refused == quota.LimitRPM) {
		c.Header("X-Ratelimit-Limit-Requests", strconv.Itoa(lim.RPM))
		c.Header("X-Ratelimit-Remaining-Requests", strconv.Itoa(d.RPMRemaining))
	}
	switch d.Refused {
	case quota.LimitStreams:
		return reject(http.StatusTooManyRequests, "streams", openai.TypeRateLimit, "concurrency_limit_exceeded", "",
			"too many concurrent streams for this key (max "+strconv.Itoa(lim.MaxStreams)+")").after(d.RetryAfter)
	case quota.LimitTokensPerDay:
		return reject(http.StatusTooManyRequests, "tokens_per_day", openai.TypeRateLimit, "tokens_per_day_exceeded", "",
			"this key has used its tokens for today").after(d.RetryAfter)
	case quota.LimitRPM:
		return reject(http.StatusTooManyRequests, "rpm", openai.TypeRateLimit, "rate_limit_exceeded", "",
			"too many requests per minute for this key (max "+strconv.Itoa(lim.RPM)+")").after(d.RetryAfter)
	}
	a.slot = lim.MaxStreams > 0
	if lim.TokensPerDay > 0 {
		a.tokensLeft = d.TokensRemaining
	}
	return nil
}

// keyCap is the output a request may ask of the engine under its key's
// max_tokens (0: no cap): the client's max (0: none) clamped to the cap,
// and the cap itself when the client named none. A clamp, not a refusal,
// as dayCap's; dayCap applies after it, so the smaller of the two wins.
func keyCap(asked int64, limit int) int64 {
	if limit <= 0 {
		return asked
	}
	if asked == 0 || asked > int64(limit) {
		return int64(limit)
	}
	return asked
}

// dayCap is the output a request may ask of the engine when its key has
// left tokens for the day (-1: no daily limit): the client's max (0: none)
// clamped to what the day has left after the prompt, and at least one
// token, since the day was not used up at admission. The day's counter
// can pass its limit by at most one request's prompt.
func dayCap(asked, left, prompt int64) int64 {
	if left < 0 {
		return asked
	}
	room := max(left-prompt, 1)
	if asked == 0 || asked > room {
		return room
	}
	return asked
}

// isBalanceRefusal reports whether the ledger refused for the team's
// balance.
func isBalanceRefusal(err error) bool { return errors.Is(err, ledger.ErrInsufficientBalance) }

// isRefusal reports whether the ledger refused a reservation before
// writing anything: no row can exist.
func isRefusal(err error) bool {
	return errors.Is(err, ledger.ErrInsufficientBalance) || errors.Is(err, ledger.ErrUnknownModel) ||
		errors.Is(err, ledger.ErrContextTooLong) || errors.Is(err, ledger.ErrUnknownTeam)
}

func reserveRejection(err error) *rejection {
	switch {
	case errors.Is(err, ledger.ErrInsufficientBalance):
		return reject(http.StatusPaymentRequired, "balance", openai.TypeInsufficient, "insufficient_balance", "",
			"the team's balance cannot cover this request's reservation; ask for credit or lower max_tokens")
	case errors.Is(err, ledger.ErrUnknownModel):
		return reject(http.StatusNotFound, "unknown_model", openai.TypeNotFound, "model_not_found", "model",
			"the model does not exist")
	case errors.Is(err, ledger.ErrContextTooLong):
		return reject(http.StatusBadRequest, "bad_request", openai.TypeInvalidRequest, "context_length_exceeded", "messages",
			"the prompt leaves no room for an answer within the model's context length")
	case errors.Is(err, ledger.ErrUnknownTeam):
		return reject(http.StatusForbidden, "forbidden", openai.TypePermission, "unknown_team", "",
			"the credential's team does not exist")
	default:
		return unavailable("ledger")
	}
}

// afterRelay ends an admitted request once its last byte is written. The
// key's limits and the model's queue end in one Redis round trip
// (endLimits): the stream slot given back, the day's tokens counted, the
// queue's head woken. With a slot to give back that runs at once
// (endLimitsNow, which a streamed answer runs before its end is written);
// without one it runs in the background, as the settle always does, so
// neither the database nor Redis can hold the client's response open.
// Wait waits for that work.
func (s *Server) afterRelay(a *admission, out Outcome) {
	u, src, settle := settleOf(a, out)
	corrected := s.corrected(a, out)
	tokens := dayTokens(a, out)
	s.endLimitsNow(a, out)
	ended := a.limitsEnded
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		if !ended {
			ended = s.endLimits(a, tokens)
		}
		s.finish(a, u, src, settle, !ended, corrected)
		if !ended {
			// The request's engine place is free (its stream was closed
			// before afterRelay runs): wake the queue's head.
			s.notify(a.model)
		}
	}()
}

// endLimitsNow ends a's limits in the caller's goroutine when a holds a
// stream slot: the key's next request may need it as soon as the client
// has the answer. It runs once; afterRelay finishes what it could not.
func (s *Server) endLimitsNow(a *admission, out Outcome) {
	if !a.slot || a.limitsTried {
		return
	}
	a.limitsTried = true
	a.limitsEnded = s.endLimits(a, dayTokens(a, out))
}

// dayTokens is what out counts against the key's day: the tokens settled,
// when the key has a tokens_per_day.
func dayTokens(a *admission, out Outcome) int64 {
	u, _, settle := settleOf(a, out)
	if !settle || a.p.Limits.TokensPerDay <= 0 {
		return 0
	}
	return u.PromptTokens + u.CompletionTokens
}

// endLimits ends a's use of its key's limits and wakes its model's queue
// in one round trip (quota.Limiter.Finish), and reports whether that
// worked. The day's tokens are counted from the usage the gateway settles:
// counting is once per request, so a later settle of the same row by the
// sweeper or the settle log counts nothing again. When the round trip
// fails the parts go on one by one: the slot's release with its retries
// (giveBackSlot), the count after the settle, the wake-up after that.
func (s *Server) endLimits(a *admission, tokens int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	_, err := s.cfg.Limits.Finish(ctx, quota.Finish{KeyID: a.p.QuotaID(), RequestID: a.requestID,
		Release: a.slot, Tokens: tokens, Model: a.model})
	if err != nil {
		s.giveBackSlot(context.Background(), a)
		return false
	}
	a.slot = false
	return true
}

// wake wakes model's queue in the background: a stream closed without a
// settle (its reservation refused after the dispatch) freed an engine
// place.
func (s *Server) wake(model string) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.notify(model)
	}()
}

// notify tells model's queue that an engine place is free.
func (s *Server) notify(model string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	_ = s.cfg.Queue.Notify(ctx, model)
}

// giveBackSlot releases the stream slot, if one was taken. It runs after
// the client left too, so ctx is not the request's. A release that fails
// (Redis slow under a mass disconnect, or down) is retried in the
// background: a slot left held would count against the key's max_streams
// until its deadline, the whole request duration.
func (s *Server) giveBackSlot(ctx context.Context, a *admission) {
	if !a.slot {
		return
	}
	a.slot = false
	if s.releaseSlot(ctx, a) == nil {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		pause := slotRetryPause
		for deadline := time.Now().Add(slotRetryFor); ; {
			stopping := false
			select {
			case <-time.After(pause): // a pause between attempts
			case <-s.stopping: // one last attempt, then the shutdown goes on
				stopping = true
			}
			err := s.releaseSlot(context.WithoutCancel(ctx), a)
			if err == nil {
				return
			}
			if stopping || time.Now().After(deadline) {
				// It frees itself at its deadline.
				s.cfg.Logger.Warn("stream slot not given back", "request_id", a.requestID, "err", err)
				return
			}
			pause = min(2*pause, time.Second)
		}
	}()
}

// How long and how often a failed slot release is retried.
const (
	slotRetryPause = 50 * time.Millisecond
	slotRetryFor   = time.Minute
)

// releaseSlot makes one attempt at giving back a's stream slot.
func (s *Server) releaseSlot(ctx context.Context, a *admission) error {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	return s.cfg.Limits.ReleaseStream(rctx, a.p.QuotaID(), a.requestID)
}

// settleOf is the one rule for how a request's row ends: the engine's
// exact usage when it arrived; the tokens produced so far when the client
// left or the engine broke, the prompt counted at its reserved estimate
// when the engine's usage never came; a cancel (settle false) when nothing
// was produced. Either way the counts are bounded (ledger.BoundUsage): at
// least what was relayed, at most what the reservation allows, never
// negative.
func settleOf(a *admission, out Outcome) (u ledger.Usage, src ledger.Source, settle bool) {
	u, src, settle, _ = settleCorrected(a, out)
	return u, src, settle
}

// settleCorrected is settleOf with what the bound corrected.
func settleCorrected(a *admission, out Outcome) (ledger.Usage, ledger.Source, bool, ledger.Correction) {
	var u ledger.Usage
	var src ledger.Source
	switch {
	case out.State == Completed && out.Usage:
		u, src = ledger.Usage{PromptTokens: out.PromptTokens, CompletionTokens: out.CompletionTokens}, ledger.SourceExact
	case out.CompletionTokens > 0 || out.Usage || out.Relayed > 0:
		prompt := out.PromptTokens
		if !out.Usage {
			prompt = a.promptEstimate
		}
		u, src = ledger.Usage{PromptTokens: prompt, CompletionTokens: out.CompletionTokens}, ledger.SourcePartial
	default:
		return ledger.Usage{}, "", false, 0
	}
	u, c := ledger.BoundUsage(u, out.Relayed, a.bounds())
	return u, src, true, c
}

// bounds is what a's reservation lets its settle bill: what the relay
// held the engine to.
func (a *admission) bounds() ledger.Bounds {
	return holding{a.promptEstimate, a.reserved.MaxOutputTokens}.bounds()
}

// corrected counts and logs, once per request, what the bound corrected in
// the usage out reports, and returns it.
func (s *Server) corrected(a *admission, out Outcome) ledger.Correction {
	u, _, settle, c := settleCorrected(a, out)
	if !settle || c == 0 {
		return 0
	}
	s.cfg.Metrics.usageCorrected(a.model, c)
	s.cfg.Logger.Warn("the engine's usage was corrected before the settle", "request_id", a.requestID, "model", a.model,
		"corrected", c.String(), "reported_prompt_tokens", out.PromptTokens, "reported_completion_tokens", out.CompletionTokens,
		"relayed", out.Relayed, "billed_prompt_tokens", u.PromptTokens, "billed_completion_tokens", u.CompletionTokens)
	return c
}

// keepTimeout bounds keeping a settle in the settle log.
const keepTimeout = 2 * time.Second

// keep saves a settle the database refused for the settle log's replayer
// (tokens were delivered: they must be billed once the database is back),
// and a refused cancel too: the team's credit comes back as soon as the
// database does, not at the sweeper's window.
func (s *Server) keep(a *admission, u ledger.Usage, src ledger.Source, settle bool, cause error) {
	if s.cfg.Settles == nil {
		s.cfg.Logger.Error("settle failed; the sweeper will close the row", "request_id", a.requestID, "err", cause)
		return
	}
	if !settle {
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

// finish settles the ledger row from how the relay ended (settleOf),
// then, when count is set (endLimits could not), counts the settled tokens
// on the key's day. Settle is idempotent, so a retry after a blip cannot
// debit twice; a settle the database refuses is kept for replay (keep).
//
// The settle's budget is settleTimeout, cut short when the gateway shuts
// down (Serve): either way a settle not done is kept before it returns.
// corrected is what the gateway's bound changed in the engine's usage.
func (s *Server) finish(a *admission, u ledger.Usage, src ledger.Source, settle, count bool, corrected ledger.Correction) {
	ctx, cancel := context.WithTimeout(s.settling, settleTimeout)
	defer cancel()
	var (
		o   ledger.Outcome
		err error
	)
	for range settleAttempts {
		if settle {
			o, err = s.cfg.Ledger.Settle(ctx, a.requestID, u, src)
		} else {
			o, err = s.cfg.Ledger.Cancel(ctx, a.requestID)
		}
		if err == nil || ctx.Err() != nil || errors.Is(err, ledger.ErrNotFound) {
			break
		}
		time.Sleep(settleRetryPause)
	}
	if !settle && errors.Is(err, ledger.ErrNotFound) {
		return // a cancel of a reservation that was never made
	}
	if err != nil {
		s.keep(a, u, src, settle, err)
		return
	}
	if o.Status != "settled" {
		return
	}
	if o.Applied {
		s.cfg.Metrics.settled(a.model, a.p.TeamName, o.CostMicrocredits, o.Usage)
		if o.Capped || corrected&ledger.OverReserved != 0 {
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
