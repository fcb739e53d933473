package gateway

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/openai"
)

// servingRecheck is how long a model the cold-start record found serving
// is taken as serving without asking again: the orchestrators refresh the
// record every second, so a model that has just gone to zero is refused at
// most this late (its requests in between queue, as without the record).
const servingRecheck = time.Second

// atZero answers the caller of a model at zero (no ready replica or
// node). A load from zero takes minutes, far past the queue limit, so the
// caller is not queued: it is held (wakeHolds) until the model's first
// replica is ready, then goes on to its reservation and the queue like any
// other request; or, when the hold (Config.WakeHold) passes first, it is
// answered 503 with a Retry-After of the load time left. The hold is what
// the SDKs tolerate: an attempt held 8 minutes is within their 10-minute
// timeout, and their retries of the 503 come back to a new hold, so an
// application on an SDK's defaults is served once the model is up rather
// than failing after two quick retries (docs/kubernetes.md, "Waking a model
// from zero"). The hold runs after the key's limits passed and before the
// reservation: a held caller keeps its key's stream slot (so a key holds
// at most its concurrent streams), no ledger row, and its body's memory in
// the hold's own budget (Config.WakeHoldBudget; past it, the 503 comes at
// once). A shutdown ends every hold with a 503 to retry elsewhere.
//
// Only a caller admission would admit is recorded as the model's demand,
// which keeps the wake signal up until a replica is ready: one within its
// key's limits (they ran first) whose team's balance covers the request
// (Credit; a caller it does not cover gets the ledger's refusal, 402, as
// on a running model). The caller is recorded by its quota identity, so a
// retrying client is one demand, and a flood of one key's requests is one
// too. Should the record be unreachable, the request takes the queue as
// before.
//
// Where nothing wakes a model (Config.Unserved: the local mode), its
// caller is neither held nor recorded as demand: it is told at once that
// no node serves the model, why, and what brings one back.
//
// A model found serving is not asked about again for servingRecheck, so a
// served model's requests pay one map read here, not a Redis round trip
// each. The model is one the catalog knows (checkBody ran first), which
// bounds the map.
func (s *Server) atZero(c *gin.Context, a *admission, r ledger.Reservation, held *heldBody) *rejection {
	if s.cfg.ColdStarts == nil {
		return nil
	}
	model := a.model
	now := s.cfg.Clock.Now()
	v, _ := s.serving.LoadOrStore(model, new(atomic.Int64))
	seen := v.(*atomic.Int64)
	if last := seen.Load(); last != 0 && now.Sub(time.Unix(0, last)) < servingRecheck {
		return nil
	}
	ctx := c.Request.Context()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	zero, err := s.cfg.ColdStarts.AtZero(rctx, model)
	cancel()
	if err != nil {
		s.cfg.Logger.Warn("cold-start record not read; the request queues", "request_id", a.requestID, "model", model, "err", err)
		return nil
	}
	if !zero {
		seen.Store(now.UnixNano())
		return nil
	}
	seen.Store(0) // every caller of a model at zero is asked about
	if s.cfg.Unserved != nil {
		return s.unserved(ctx, model)
	}
	if s.cfg.Credit != nil {
		lctx, cancel := context.WithTimeout(ctx, s.cfg.LedgerTimeout)
		err := s.cfg.Credit.Covers(lctx, r)
		cancel()
		if err != nil {
			// Not demand: the ledger's own refusal, or its outage, is the
			// answer, as it would be on a running model.
			return reserveRejection(err)
		}
	}
	retry, zero, err := s.refuse(ctx, a)
	if err != nil || !zero {
		return nil // unreadable (the request queues), or a replica became ready meanwhile
	}
	if s.cfg.WakeHold > 0 {
		if w := held.total() + holdOverhead; s.holds.take(w) {
			held.release() // the body is decoded: what stays is in the hold's budget
			end := s.hold(ctx, a)
			s.holds.used.Add(-w)
			switch end {
			case holdReady:
				return nil
			case holdStopping:
				return reject(http.StatusServiceUnavailable, "shutting_down", openai.TypeUnavailable, "shutting_down", "",
					"the gateway is shutting down; retry").after(retryUnavailable)
			case holdGone:
				return reject(http.StatusServiceUnavailable, "at_zero", openai.TypeUnavailable, "model_loading", "",
					"the client went away while the model "+strconv.Quote(model)+" was starting")
			}
			// The hold passed: ask once more (a replica may just have
			// become ready), which also holds the caller's demand anew.
			if retry, zero, err = s.refuse(ctx, a); err != nil || !zero {
				return nil
			}
		}
	}
	return reject(http.StatusServiceUnavailable, "at_zero", openai.TypeUnavailable, "model_loading", "",
		"the model "+strconv.Quote(model)+" is starting from zero replicas; retry after the time in Retry-After").after(retry)
}

// unserved answers the caller of a model at zero where nothing wakes it:
// no node serves the model, and none will until someone starts or
// re-registers one, so the answer promises no load time and advises no
// wait (a retry is the client's choice, and gets the same answer until
// then).
func (s *Server) unserved(ctx context.Context, model string) *rejection {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LedgerTimeout)
	why := s.cfg.Unserved.Unserved(ctx, model)
	cancel()
	return reject(http.StatusServiceUnavailable, "unserved", openai.TypeUnavailable, "no_healthy_node", "",
		"no node serves the model "+strconv.Quote(model)+" and nothing in this deployment starts one: "+why)
}

// refuse asks the cold-start record whether a's model is at zero,
// holding its caller's demand when it is; an error means the record
// could not be read, and the request takes the queue.
func (s *Server) refuse(ctx context.Context, a *admission) (time.Duration, bool, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	retry, zero, err := s.cfg.ColdStarts.Refuse(rctx, a.model, a.p.QuotaID())
	cancel()
	if err != nil {
		s.cfg.Logger.Warn("cold-start record not read; the request queues", "request_id", a.requestID, "model", a.model, "err", err)
	}
	return retry, zero, err
}

// hold waits, up to the gateway's wake hold, for a's model to leave
// zero, counting the caller among the model's held ones meanwhile.
func (s *Server) hold(ctx context.Context, a *admission) holdEnd {
	g := s.cfg.Metrics.wakeHeld.WithLabelValues(a.model)
	g.Inc()
	defer g.Dec()
	start := s.cfg.Clock.Now()
	end := s.holds.wait(ctx, a.model, s.cfg.WakeHold, s.draining)
	s.cfg.Metrics.wakeHolds.WithLabelValues(a.model, end.String()).Observe(s.cfg.Clock.Since(start).Seconds())
	return end
}
