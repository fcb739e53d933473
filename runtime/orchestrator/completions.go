package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/registry"
)

// CompletionTTL is how long a done frame's counts are kept for the ledger
// sweeper: longer than the sweeper's 15 min age plus its 60 s period, so
// every orphaned row is swept while its counts are still there.
const CompletionTTL = time.Hour

// completion is a done frame's counts as kept in Redis.
type completion struct {
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	FinishReason     string `json:"finish_reason,omitempty"`
	NodeID           string `json:"node_id"`
}

// recordDone keeps a done frame's counts for the sweeper. The gateway
// settles live requests itself; these counts settle the rows of a gateway
// that died, or of a done replayed after a reconnect.
func (o *Orchestrator) recordDone(ctx context.Context, nodeID string, d *nodeproto.Done) {
	b, err := json.Marshal(completion{PromptTokens: d.PromptTokens, CompletionTokens: d.CompletionTokens,
		FinishReason: d.FinishReason, NodeID: nodeID})
	if err == nil {
		rctx, cancel := context.WithTimeout(ctx, redisTimeout)
		err = o.cfg.Redis.Set(rctx, o.keys.Completion(d.RequestID), b, CompletionTTL).Err()
		cancel()
	}
	if err != nil && ctx.Err() == nil {
		o.cfg.Logger.Warn("completion not recorded", "request_id", d.RequestID, "err", err)
	}
}

// CompletionLog answers the ledger sweeper from the done frames the
// orchestrator replicas received.
type CompletionLog struct {
	rdb  redis.UniversalClient
	keys registry.Keys
}

var _ ledger.CompletionLog = (*CompletionLog)(nil)

// NewCompletionLog reads the completions kept under prefix.
func NewCompletionLog(rdb redis.UniversalClient, prefix string) *CompletionLog {
	return &CompletionLog{rdb: rdb, keys: registry.NewKeys(prefix)}
}

// Completion implements ledger.CompletionLog.
func (l *CompletionLog) Completion(ctx context.Context, requestID string) (ledger.Usage, bool, error) {
	b, err := l.rdb.Get(ctx, l.keys.Completion(requestID)).Bytes()
	if errors.Is(err, redis.Nil) {
		return ledger.Usage{}, false, nil
	}
	if err != nil {
		return ledger.Usage{}, false, fmt.Errorf("read completion of %s: %w", requestID, err)
	}
	var c completion
	if err := json.Unmarshal(b, &c); err != nil {
		return ledger.Usage{}, false, fmt.Errorf("decode completion of %s: %w", requestID, err)
	}
	return ledger.Usage{PromptTokens: c.PromptTokens, CompletionTokens: c.CompletionTokens}, true, nil
}
