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

// reservation is what the ledger is asked to hold for req: the prompt's
// estimate and the output cap — the client's, clamped by its key's
// max_tokens and by what the key's day has left (checkLimits) — which the
// ledger may clamp further.
func (s *Server) reservation(a *admission, req *openai.ChatCompletionRequest) ledger.Reservation {
	p := a.p
	a.promptEstimate = tokens.EstimateRequest(req)
	a.promptFloor = min(tokens.PromptWords(req.Messages), a.promptEstimate)
	a.stopBytes = int64(len(req.Stop)) // raw: never fewer bytes than its text
	asked := keyCap(req.MaxOutputTokens(), p.Limits.MaxTokens)
	return ledger.Reservation{
		RequestID: a.requestID, TeamID: p.TeamID, KeyID: p.KeyID, Model: req.Model,
		PromptTokens: a.promptEstimate, MaxOutputTokens: dayCap(asked, a.tokensLeft, a.promptEstimate),
	}
}

// admit reserves r in the ledger for an admission whose key's limits
// passed (checkLimits: the stream slot, the day's tokens, requests per
// minute, in one Redis round trip, before the body was read). On a
// refusal the caller closes a (Close), which gives the slot back.
//
// When the team's recently seen balance covers the request many times over
// (balanceView.claim), the reservation is only started here, on the
// ledger's quote of the cap (ledger.Ledger.Quote): the request goes to its
// engine while the reservation commits, and confirm waits for it before
// anything of the answer reaches the client.
func (s *Server) admit(ctx context.Context, a *admission, r ledger.Reservation) *rejection {
	p := a.p
	// The quote and the reservation share one budget: a frozen database
	// must not hold the client (LedgerTimeout). A context's deadline is
	// kept in real time, whatever the gateway's clock.
	deadline := time.Now().Add(s.cfg.LedgerTimeout)
	if s.reserveEarly(ctx, deadline, a, r) {
		return nil
	}
	// From here a row may exist: a reservation that panics, or whose
	// answer is lost, leaves the admission held, and Close cancels it.
	a.state = admHeld
	rctx, cancel := context.WithDeadline(ctx, deadline)
	res, err := s.cfg.Ledger.Reserve(rctx, r)
	cancel()
	s.balances.observe(p.TeamID, 0, res, err)
	return a.take(res, err)
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
	a.state = admReserving
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

// checkLimits applies the key's limits in one round trip, moves a to
// admAdmitted when they pass, and sets the x-ratelimit-* headers of the
// limits it passed.
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
	if d.Refused != "" {
		s.countRefusal(ctx, p, a.requestID)
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
	a.state = admAdmitted
	if lim.TokensPerDay > 0 {
		a.tokensLeft = d.TokensRemaining
	}
	return nil
}

// countRefusal records a 429 of p's key for the console, within the
// Redis timeout; a count that fails is logged and the 429 goes out anyway.
func (s *Server) countRefusal(ctx context.Context, p auth.Principal, requestID string) {
	if s.cfg.Refusals == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	if err := s.cfg.Refusals.CountRefusal(rctx, p.QuotaID()); err != nil {
		s.cfg.Logger.Warn("refusal not counted", "request_id", requestID, "err", err)
	}
}

// recordRefusal counts r, a refusal of a's request, for its team's and the
// platform's durable counts (402, 429 and 503 only), within the Redis
// timeout; a count that fails is logged and the refusal goes out anyway.
func (s *Server) recordRefusal(ctx context.Context, a *admission, r *rejection) {
	if s.cfg.RefusalLog == nil || a == nil || a.p.TeamID <= 0 {
		return
	}
	switch r.status {
	case http.StatusPaymentRequired, http.StatusTooManyRequests, http.StatusServiceUnavailable:
	default:
		return
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	err := s.cfg.RefusalLog.RecordRefusal(rctx, quota.Refusal{TeamID: a.p.TeamID, Model: a.model, Status: r.status, Reason: r.reason})
	if err != nil {
		s.cfg.Logger.Warn("refusal not recorded", "request_id", a.requestID, "err", err)
	}
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
