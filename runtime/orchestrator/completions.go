package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
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
// that died, or of a done replayed after a reconnect. Each node's record of
// a request is a field of its own, so a late record from a first attempt's
// node cannot overwrite the retry's (see best).
func (o *Orchestrator) recordDone(ctx context.Context, nodeID string, d *nodeproto.Done) {
	b, err := json.Marshal(completion{PromptTokens: d.PromptTokens, CompletionTokens: d.CompletionTokens,
		FinishReason: d.FinishReason, NodeID: nodeID})
	if err == nil {
		rctx, cancel := context.WithTimeout(ctx, redisTimeout)
		key := o.keys.Completion(d.RequestID)
		_, err = o.cfg.Redis.TxPipelined(rctx, func(p redis.Pipeliner) error {
			p.HSet(rctx, key, nodeID, b)
			p.Expire(rctx, key, CompletionTTL)
			return nil
		})
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
	recs, err := l.rdb.HGetAll(ctx, l.keys.Completion(requestID)).Result()
	if err != nil {
		return ledger.Usage{}, false, fmt.Errorf("read completion of %s: %w", requestID, err)
	}
	if len(recs) == 0 {
		return ledger.Usage{}, false, nil
	}
	var found []completion
	for node, b := range recs {
		var c completion
		if err := json.Unmarshal([]byte(b), &c); err != nil {
			return ledger.Usage{}, false, fmt.Errorf("decode completion of %s from %s: %w", requestID, node, err)
		}
		found = append(found, c)
	}
	c := best(found)
	return ledger.Usage{PromptTokens: c.PromptTokens, CompletionTokens: c.CompletionTokens}, true, nil
}

// best picks the record that settles a request several nodes reported (a
// first attempt lost before its first event, then its retry): a record of
// a finished answer over an abort's, then the one with more output, then
// the node id, so every reader picks the same.
func best(recs []completion) completion {
	finished := func(c completion) bool {
		return c.FinishReason != "" && c.FinishReason != openai.FinishAbort
	}
	b := recs[0]
	for _, c := range recs[1:] {
		switch {
		case finished(c) != finished(b):
			if finished(c) {
				b = c
			}
		case c.CompletionTokens != b.CompletionTokens:
			if c.CompletionTokens > b.CompletionTokens {
				b = c
			}
		case c.NodeID < b.NodeID:
			b = c
		}
	}
	return b
}
