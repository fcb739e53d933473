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

// doneRec is a write waiting for the recorder: a request assigned to a
// node (d nil), or a node's done frame with the connection that
// acknowledges it.
type doneRec struct {
	c         *nodeConn
	d         *nodeproto.Done
	node      string // the node assigned, or the done's node
	requestID string
	// running says the done's request was found running on c: it was
	// assigned there, and no check is needed.
	running bool
}

// doneRecorder records done frames and assignments off the sockets' read
// loops, many in one Redis round trip: a read loop only queues its frame,
// so a slow Redis never holds up the chunks of the node's other streams.
// The first write to find no flush running starts one, which writes until
// nothing is queued and ends (no goroutine while the platform is idle).
// One queue keeps a request's assignment ahead of its node's done.
type doneRecorder struct {
	mu      sync.Mutex
	pending []doneRec
	running bool
	wg      sync.WaitGroup // the running flush; Run waits for it
}

// Bounds of the done recorder: a batch is one MULTI of two commands per
// write; a read loop that finds maxPendingDones queued writes its done
// itself, which slows the node's socket down to Redis's pace.
const (
	maxDoneBatch    = 256
	maxPendingDones = 8192
)

// recordAssigned notes that requestID was assigned to node, for as long
// as its done may come (CompletionTTL): a done frame is recorded only from
// a node the request was assigned to, so a node cannot write the counts
// the sweeper bills an orphaned row of someone else's request from. It is
// queued before the assign frame is, so it is written before its done.
func (o *Orchestrator) recordAssigned(node, requestID string) {
	o.queueRecord(doneRec{node: node, requestID: requestID})
}

// recordDone keeps a done frame's counts for the sweeper, then tells the
// node it may forget the frame. The gateway settles live requests itself;
// these counts settle the rows of a gateway that died, or of a done
// replayed after a reconnect. running says the request's stream was found
// on c; any other done (after a cancel, replayed on a new connection, or
// forged) is recorded only if the request was assigned to c's node. Each
// node's record of a request is a field of its own, so a late record from
// a first attempt's node cannot overwrite the retry's (see best).
func (o *Orchestrator) recordDone(c *nodeConn, d *nodeproto.Done, running bool) {
	o.queueRecord(doneRec{c: c, d: d, node: c.rec.ID, requestID: d.RequestID, running: running})
}

// queueRecord queues one write and starts a flush if none runs. An
// assignment always queues, past maxPendingDones too: it is made under
// the connection's lock, and assignments are bounded by the requests in
// flight, which the gateways bound.
func (o *Orchestrator) queueRecord(rec doneRec) {
	r := &o.dones
	r.mu.Lock()
	if len(r.pending) >= maxPendingDones && rec.d != nil {
		r.mu.Unlock()
		o.writeDones([]doneRec{rec})
		return
	}
	r.pending = append(r.pending, rec)
	if r.running {
		r.mu.Unlock()
		return
	}
	r.running = true
	r.wg.Add(1)
	r.mu.Unlock()
	go o.flushDones()
}

// flushDones writes the queued records until none is left. Each write
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
// per slot), after checking in one round trip the assignment of each done
// not found running, and acknowledges each frame on its connection, one
// ack frame per connection. A frame that was not recorded (refused, or
// Redis failed) is acknowledged too: the record is the sweeper's
// fallback, and the gateway settles without it.
func (o *Orchestrator) writeDones(batch []doneRec) {
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	keep, refused := o.assignedDones(ctx, batch)
	_, err := o.cfg.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range batch {
			if r.d == nil {
				key := o.keys.CompletionNodes(r.requestID)
				p.SAdd(ctx, key, r.node)
				p.Expire(ctx, key, CompletionTTL)
				continue
			}
			if !keep[i] {
				continue
			}
			b, err := json.Marshal(completion{PromptTokens: r.d.PromptTokens, CompletionTokens: r.d.CompletionTokens,
				FinishReason: r.d.FinishReason, NodeID: r.node})
			if err != nil {
				return err
			}
			key := o.keys.Completion(r.requestID)
			p.HSet(ctx, key, r.node, b)
			p.Expire(ctx, key, CompletionTTL)
		}
		return nil
	})
	if err != nil {
		o.cfg.Logger.Warn("completions not recorded", "records", len(batch), "first_request_id", batch[0].requestID, "err", err)
	}
	if len(refused) > 0 {
		o.cfg.Metrics.donesRefused.Add(float64(len(refused)))
		first := batch[refused[0]]
		o.cfg.Logger.Warn("done frames for requests never assigned to their node; not recorded",
			"count", len(refused), "node_id", first.node, "request_id", first.requestID)
	}
	var conns []*nodeConn
	acks := make(map[*nodeConn][]string)
	for _, r := range batch {
		if r.d == nil {
			continue
		}
		if _, ok := acks[r.c]; !ok {
			conns = append(conns, r.c)
		}
		acks[r.c] = append(acks[r.c], r.requestID)
	}
	for _, c := range conns {
		c.send(&nodeproto.Ack{RequestIDs: acks[c]})
	}
}

// assignedDones reports which of batch's done frames may be recorded (keep,
// by index) and which were refused: a done found running is kept, as is
// one whose request the batch itself assigns to its node; any other is
// kept only if its node is in the request's assignment set. A check that
// fails keeps nothing: the record is a fallback, and a forged one bills
// someone.
func (o *Orchestrator) assignedDones(ctx context.Context, batch []doneRec) (keep []bool, refused []int) {
	keep = make([]bool, len(batch))
	var assigned map[[2]string]bool // assignments in this batch
	var check []int
	for i, r := range batch {
		switch {
		case r.d == nil:
			if assigned == nil {
				assigned = map[[2]string]bool{}
			}
			assigned[[2]string{r.requestID, r.node}] = true
		case r.running || assigned[[2]string{r.requestID, r.node}]:
			keep[i] = true
		default:
			check = append(check, i)
		}
	}
	if len(check) == 0 {
		return keep, nil
	}
	cmds := make([]*redis.BoolCmd, len(check))
	_, err := o.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range check {
			cmds[j] = p.SIsMember(ctx, o.keys.CompletionNodes(batch[i].requestID), batch[i].node)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		o.cfg.Logger.Warn("assignments of done frames not read", "dones", len(check), "err", err)
	}
	for j, i := range check {
		switch {
		case cmds[j].Err() != nil: // not recorded, and logged above
		case cmds[j].Val():
			keep[i] = true
		default:
			refused = append(refused, i)
		}
	}
	return keep, refused
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
