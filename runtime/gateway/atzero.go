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

// atZero answers the caller of a model at zero (no ready replica or node)
// with 503 and a Retry-After of the load time left, instead of queueing
// it: a load from zero takes minutes, far past the queue limit, and a
// request queued that long would fail anyway. It runs after the key's
// limits passed and before the reservation, so the refusal holds no
// stream slot and no ledger row (it counts as one of the key's requests
// per minute, as every request does).
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
// A model found serving is not asked about again for servingRecheck, so a
// served model's requests pay one map read here, not a Redis round trip
// each. The model is one the catalog knows (checkBody ran first), which
// bounds the map.
func (s *Server) atZero(c *gin.Context, a *admission, r ledger.Reservation) *rejection {
	if s.cfg.ColdStarts == nil {
		return nil
	}
	model := a.model
	now := time.Now()
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
	rctx, cancel = context.WithTimeout(ctx, s.cfg.RedisTimeout)
	retry, zero, err := s.cfg.ColdStarts.Refuse(rctx, model, a.p.QuotaID())
	cancel()
	if err != nil {
		s.cfg.Logger.Warn("cold-start record not read; the request queues", "request_id", a.requestID, "model", model, "err", err)
		return nil
	}
	if !zero {
		return nil // a replica became ready meanwhile
	}
	return reject(http.StatusServiceUnavailable, "at_zero", openai.TypeUnavailable, "model_loading", "",
		"the model "+strconv.Quote(model)+" is starting from zero replicas; retry after the time in Retry-After").after(retry)
}
