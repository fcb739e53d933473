package gateway

import (
	"context"
	"time"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/backoff"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
)

// admissionState is where an admission stands. It only moves forward:
// pending → admitted → (reserving →) held → (released | releaseFailed →)
// closed, with a refused reservation going from reserving back to
// admitted, and Close taking any state to closed.
type admissionState uint8

const (
	// admPending holds nothing: the key's limits have not passed.
	admPending admissionState = iota
	// admAdmitted holds the key's limits (a stream slot, when the key has
	// max_streams) and no ledger row: none was asked for yet, or the
	// ledger refused before writing one.
	admAdmitted
	// admReserving is admAdmitted with a reservation running while the
	// engine prefills (reserveEarly); confirm takes its answer.
	admReserving
	// admHeld holds the limits and a ledger row, or maybe one: a
	// reservation whose answer was lost may have committed, and Close
	// cancels it.
	admHeld
	// admReleased holds the row only: the limits were ended (the slot
	// given back, the day's tokens counted, the queue woken) before a
	// streamed answer's end was written (release).
	admReleased
	// admReleaseFailed is admReleased where that end failed: the slot's
	// release is retried in the background, and the day's tokens are
	// counted after the settle and the queue woken after that.
	admReleaseFailed
	// admClosed holds nothing the handler must give back: the settle, and
	// a retried release, run in the background (Server.bg).
	admClosed
)

func (st admissionState) String() string {
	return [...]string{"pending", "admitted", "reserving", "held", "released", "release_failed", "closed"}[st]
}

// admission is one request's hold on the platform: its key's limits in
// Redis and its row in the ledger, from admission to settle. Its handler
// defers Close once; Close gives everything back, once, whatever state the
// request reached and however it ended. An admission is used by its
// handler's goroutine only (the early reservation's goroutine answers on
// a channel).
type admission struct {
	s         *Server
	state     admissionState
	p         auth.Principal
	requestID string
	model     string
	// slot is whether the key's limits include a stream slot: held from
	// admAdmitted until the limits end.
	slot bool
	// promptEstimate is the reserved prompt count, used for a partial
	// settle when the engine's usage never arrived.
	promptEstimate int64
	// promptFloor and stopBytes bound the engine's counts from the
	// request (ledger.Bounds): the words of its prompt's text, the size
	// of its stop sequences. The prompt itself is not kept.
	promptFloor, stopBytes int64
	// tokensLeft is what the key's day has left at admission; -1 when the
	// key has no tokens_per_day.
	tokensLeft int64
	reserved   ledger.Reserved
	// queueWait is the time the request waited in its model's queue, and
	// timing how its answer came (set before Close; nil: not timed).
	queueWait time.Duration
	timing    *ledger.Timing
	// early carries the answer of a reservation that runs while the
	// engine prefills (admReserving).
	early chan reserveAnswer
	// refused is the refusal confirm returned, repeated to a later call.
	refused *rejection
}

// newAdmission is the pending admission of a request of p; its model is
// set once the body named one the catalog knows.
func (s *Server) newAdmission(p auth.Principal, requestID string) *admission {
	return &admission{s: s, p: p, requestID: requestID, tokensLeft: -1}
}

// take takes a reservation's answer: the row held (admHeld), or a
// refusal. A refusal before anything was written leaves a admAdmitted;
// any other error leaves it admHeld, since the row may have committed with
// its answer lost (a dropped connection, the client gone mid-commit, a
// frozen database's batch that may yet commit: ledger.ErrOutcomeUnknown),
// so that Close cancels it, idempotently, rather than hold the team's
// credit until the sweeper's window.
func (a *admission) take(res ledger.Reserved, err error) *rejection {
	if err != nil {
		a.state = admAdmitted
		if !isRefusal(err) {
			a.state = admHeld
		}
		return reserveRejection(err)
	}
	a.reserved = res
	a.state = admHeld
	a.s.cfg.Metrics.reserved(a.model, a.p.TeamName, res.Microcredits)
	return nil
}

// confirm waits for an early reservation's answer (once; later calls
// repeat the first's result) and returns the refusal to answer the client
// with when the ledger did not hold the request; Close then gives back
// what admission took. Without an early reservation it returns nil.
func (a *admission) confirm() *rejection {
	if a.state != admReserving {
		return a.refused
	}
	ans := <-a.early
	a.early = nil
	a.refused = a.take(ans.res, ans.err)
	a.s.cfg.Metrics.earlyReservation(a.refused == nil)
	return a.refused
}

// release ends a held admission's limits before a streamed answer's end
// is written, when the admission holds a stream slot: a client that sends
// its next request as soon as it read [DONE] finds the slot free. out is
// the relay's outcome so far, whose tokens count on the key's day.
func (a *admission) release(out Outcome) {
	if a.state != admHeld || !a.slot {
		return
	}
	a.state = admReleaseFailed
	if a.endLimits(a.dayTokens(billOf(out, a.holding()))) {
		a.state = admReleased
	}
}

// Close ends the admission with out, once; later calls do nothing. The
// order is fixed: an early reservation's answer is taken (confirm); the
// key's limits end — the stream slot given back, the day's tokens counted,
// the model's queue woken — in one Redis round trip (endLimits); then the
// ledger row is settled from out, or cancelled when nothing was produced
// (billOf, once). With a slot to give back the limits end in the caller's
// goroutine: the key's next request may need the slot as soon as the
// client has its answer. The rest runs in the background (Server.bg), so
// that neither the database nor Redis holds the client's response open.
// When the limits' round trip fails the parts go on one by one: the slot's
// release with its retries (giveBackSlot), the day's count after the
// settle, the wake-up after that.
//
// The caller has closed the request's engine stream first: the engine's
// place is free when the queue is woken.
func (a *admission) Close(out Outcome) {
	if a.state == admReserving {
		a.confirm()
	}
	from := a.state
	a.state = admClosed
	if from == admPending || from == admClosed {
		return
	}
	s := a.s
	row := from != admAdmitted
	var (
		b      bill // how the row ends: the one reckoning of out
		tokens int64
	)
	if row {
		b = billOf(out, a.holding())
		s.logCorrected(a, out, b)
		tokens = a.dayTokens(b)
	}
	// tried: the limits' round trip ran; ended: it worked.
	tried := from == admReleased || from == admReleaseFailed
	ended := from == admReleased
	if !tried && a.slot {
		tried, ended = true, a.endLimits(tokens)
	}
	if !row && tried && ended {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		if !tried {
			ended = a.endLimits(tokens)
		}
		if row {
			s.finish(a, b, !ended)
		}
		if !ended {
			s.notify(a.model)
		}
	}()
}

// endLimits ends a's use of its key's limits and wakes its model's queue
// in one round trip (quota.Limiter.Finish), and reports whether that
// worked. The day's tokens are counted from the usage the gateway settles:
// counting is once per request, so a later settle of the same row by the
// sweeper or the settle log counts nothing again. When the round trip
// fails, the slot's release goes on alone, with its retries.
func (a *admission) endLimits(tokens int64) bool {
	s := a.s
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	_, err := s.cfg.Limits.Finish(ctx, quota.Finish{KeyID: a.p.QuotaID(), RequestID: a.requestID,
		Release: a.slot, Tokens: tokens, Model: a.model})
	if err != nil {
		s.giveBackSlot(a)
		return false
	}
	return true
}

// notify tells model's queue that an engine place is free.
func (s *Server) notify(model string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RedisTimeout)
	defer cancel()
	_ = s.cfg.Queue.Notify(ctx, model)
}

// giveBackSlot releases a's stream slot, if the key has one. A release
// that fails (Redis slow under a mass disconnect, or down) is retried in
// the background: a slot left held would count against the key's
// max_streams until its deadline, the whole request duration.
func (s *Server) giveBackSlot(a *admission) {
	if !a.slot || s.releaseSlot(context.Background(), a) == nil {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		bo := backoff.New(slotRetry, nil)
		clk := s.cfg.Clock
		for deadline := clk.Now().Add(slotRetryFor); ; {
			stopping := false
			pause := clk.NewTimer(bo.Next())
			select {
			case <-pause.C(): // a pause between attempts
			case <-s.stopping: // one last attempt, then the shutdown goes on
				pause.Stop()
				stopping = true
			}
			err := s.releaseSlot(context.Background(), a)
			if err == nil {
				return
			}
			if stopping || clk.Now().After(deadline) {
				// It frees itself at its deadline.
				s.cfg.Logger.Warn("stream slot not given back", "request_id", a.requestID, "err", err)
				return
			}
		}
	}()
}

// How long and how often a failed slot release is retried.
// slotRetry draws each pause with full jitter, so that the releases a mass
// disconnect failed together do not come back together: up to 50 ms first
// (a blip passes within it), doubling to at most 1 s (a Redis back from a
// restart is seen within a second).
var slotRetry = backoff.Schedule{Base: 50 * time.Millisecond, Cap: time.Second}

// slotRetryFor bounds the retries; the slot frees itself at its deadline
// after that.
const slotRetryFor = time.Minute

// releaseSlot makes one attempt at giving back a's stream slot.
func (s *Server) releaseSlot(ctx context.Context, a *admission) error {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	return s.cfg.Limits.ReleaseStream(rctx, a.p.QuotaID(), a.requestID)
}

// dayTokens is what a bill counts against the key's day: the tokens
// settled, when the key has a tokens_per_day.
func (a *admission) dayTokens(b bill) int64 {
	if !b.settle || a.p.Limits.TokensPerDay <= 0 {
		return 0
	}
	return b.usage.PromptTokens + b.usage.CompletionTokens
}

// bill is how a request's row ends: settled with usage from src (settle),
// or cancelled; corrected says what the bound changed in the engine's
// counts.
type bill struct {
	usage     ledger.Usage
	src       ledger.Source
	settle    bool
	corrected ledger.Correction
}

// billOf is the one rule for what a relayed request is billed, and so
// what its client is shown as its usage: the engine's exact usage when it
// arrived; the tokens produced so far when the client left or the engine
// broke — the platform's own count of what it relayed, the prompt at its
// reserved estimate, when the engine's usage never came; nothing (settle
// false: a cancel) when nothing was produced. Either way the counts are
// bounded (ledger.BoundUsage): within the tolerance of the text relayed,
// the prompt at least its words, at most what the reservation allows,
// never negative; the Correction says what the bound changed.
func billOf(out Outcome, h holding) bill {
	var u ledger.Usage
	var src ledger.Source
	switch {
	case out.State == Completed && out.Usage:
		u, src = ledger.Usage{PromptTokens: out.PromptTokens, CompletionTokens: out.CompletionTokens}, ledger.SourceExact
	case out.CompletionTokens > 0 || out.Usage || out.Relayed.Chunks > 0:
		prompt := out.PromptTokens
		if !out.Usage {
			prompt = h.promptEstimate
		}
		u, src = ledger.Usage{PromptTokens: prompt, CompletionTokens: out.CompletionTokens}, ledger.SourcePartial
	default:
		return bill{}
	}
	u, c := ledger.BoundUsage(u, out.Relayed, h.bounds())
	return bill{usage: u, src: src, settle: true, corrected: c}
}

// holding is what a's reservation lets its settle bill: what the relay
// held the engine to.
func (a *admission) holding() holding {
	return holding{promptEstimate: a.promptEstimate, maxOutput: a.reserved.MaxOutputTokens,
		promptFloor: a.promptFloor, stopBytes: a.stopBytes}
}

// logCorrected counts and logs, once per request (Close), what the bound
// corrected in the usage out reports.
func (s *Server) logCorrected(a *admission, out Outcome, b bill) {
	u, c := b.usage, b.corrected
	if !b.settle || c == 0 {
		return
	}
	s.cfg.Metrics.usageCorrected(a.model, c)
	r := out.Relayed
	s.cfg.Logger.Warn("the engine's usage was corrected before the settle", "request_id", a.requestID, "model", a.model,
		"corrected", c.String(), "reported_prompt_tokens", out.PromptTokens, "reported_completion_tokens", out.CompletionTokens,
		"prompt_floor", a.promptFloor, "prompt_estimate", a.promptEstimate, "relayed_chunks", r.Chunks, "relayed_words", r.Words,
		"relayed_bytes", r.Bytes, "relayed_tokens", r.Tokens, "billed_prompt_tokens", u.PromptTokens, "billed_completion_tokens", u.CompletionTokens)
}
