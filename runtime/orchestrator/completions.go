package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
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

// doneRec is a done frame waiting to be recorded, with the connection
// that acknowledges it to its node.
type doneRec struct {
	c *nodeConn
	d *nodeproto.Done
}

// doneRecorder records done frames off the sockets' read loops, many in one
// Redis round trip: a read loop only queues its frame, so a slow Redis
// never holds up the chunks of the node's other streams. The first frame
// to find no flush running starts one, which writes until nothing is
// queued and ends (no goroutine while the platform is idle).
type doneRecorder struct {
	mu      sync.Mutex
	pending []doneRec
	running bool
	wg      sync.WaitGroup // the running flush; Run waits for it
}

// Bounds of the done recorder: a batch is one MULTI of two commands per
// frame; a read loop that finds maxPendingDones queued records its own
// frame itself, which slows the node's socket down to Redis's pace.
const (
	maxDoneBatch    = 256
	maxPendingDones = 8192
)

// recordDone keeps a done frame's counts for the sweeper, then tells the
// node it may forget the frame. The gateway settles live requests itself;
// these counts settle the rows of a gateway that died, or of a done
// replayed after a reconnect. Each node's record of a request is a field
// of its own, so a late record from a first attempt's node cannot
// overwrite the retry's (see best).
func (o *Orchestrator) recordDone(c *nodeConn, d *nodeproto.Done) {
	r := &o.dones
	r.mu.Lock()
	if len(r.pending) >= maxPendingDones {
		r.mu.Unlock()
		o.writeDones([]doneRec{{c, d}})
		return
	}
	r.pending = append(r.pending, doneRec{c, d})
	if r.running {
		r.mu.Unlock()
		return
	}
	r.running = true
	r.wg.Add(1)
	r.mu.Unlock()
	go o.flushDones()
}

// flushDones writes the queued done frames until none is left. Each write
// is bounded by redisTimeout.
func (o *Orchestrator) flushDones() {
	r := &o.dones
	defer r.wg.Done()
	for {
		r.mu.Lock()
		if len(r.pending) == 0 {
			r.running = false
			r.pending = nil // an idle platform keeps no backing array
			r.mu.Unlock()
			return
		}
		n := min(len(r.pending), maxDoneBatch)
		batch := r.pending[:n:n]
		r.pending = r.pending[n:]
		r.mu.Unlock()
		o.writeDones(batch)
	}
}

// writeDones records batch in one transaction (a cluster client makes one
// per slot) and acknowledges each frame on its connection, one ack frame
// per connection. A frame whose record failed is acknowledged too: the
// record is the sweeper's fallback, and the gateway settles without it.
func (o *Orchestrator) writeDones(batch []doneRec) {
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	_, err := o.cfg.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, r := range batch {
			b, err := json.Marshal(completion{PromptTokens: r.d.PromptTokens, CompletionTokens: r.d.CompletionTokens,
				FinishReason: r.d.FinishReason, NodeID: r.c.rec.ID})
			if err != nil {
				return err
			}
			key := o.keys.Completion(r.d.RequestID)
			p.HSet(ctx, key, r.c.rec.ID, b)
			p.Expire(ctx, key, CompletionTTL)
		}
		return nil
	})
	if err != nil {
		o.cfg.Logger.Warn("completions not recorded", "requests", len(batch), "first_request_id", batch[0].d.RequestID, "err", err)
	}
	var conns []*nodeConn
	acks := make(map[*nodeConn][]string)
	for _, r := range batch {
		if _, ok := acks[r.c]; !ok {
			conns = append(conns, r.c)
		}
		acks[r.c] = append(acks[r.c], r.d.RequestID)
	}
	for _, c := range conns {
		c.send(&nodeproto.Ack{RequestIDs: acks[c]})
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
