package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Group commit (PostgreSQL): concurrent reservations are combined into one
// statement, and so are concurrent settles and cancels, each batch one
// transaction and one durable commit, whatever the number of requests and
// teams in it. A team's row is locked once per batch, not once per request,
// so a burst from one team no longer queues on its row.
//
// A batch only ever does what the one-request paths would do, and gives
// back what it cannot do exactly: a reservation whose team cannot cover the
// whole batch's share of it, an unknown model, a prompt that does not fit,
// a duplicate request id, a settle of a row that is not reserved — each of
// those requests goes on alone through the precise path, which decides.
//
// A goroutine runs batches while calls wait: the first caller to find none
// running starts it, and it ends when no call waits. A ledger runs one
// batch at a time, of either kind. A reservation batch and a settle batch
// lock the same team rows: run side by side, one waited for the other's
// commit, then re-read its rows and re-ran its plan's start (PostgreSQL's
// EvalPlanQual) — CPU spent for no gain. Run in turn, each waits only on
// the mutex, and the batches waiting meanwhile grow: a batch takes its
// calls once it holds the mutex.
//
// A caller waits for its batch only until its own context ends, so that a
// frozen database (a stopped server or a black-holed network accepts bytes
// and answers nothing) cannot hold it past its budget; and it still knows
// what became of its call. A call whose caller leaves before its batch
// takes it is withdrawn: nothing was done, and the caller gets its
// context's error. A caller that leaves while its batch runs gets
// ErrOutcomeUnknown: the batch may yet commit, and the caller must treat
// the call as possibly done (the gateway answers 503 and cancels the
// reservation, keeping the cancel for replay if the database refuses it).
// A batch is bounded by batchTimeout.

// maxBatch bounds a batch: PostgreSQL takes one array per column, and a
// batch holds its teams' rows locked while it runs.
const maxBatch = 256

// batchTimeout bounds one batch's statement: no caller waits longer (the
// gateway's longest budget, its 10 s settle), so a batch still running then
// answers no one and only holds the ledger's next batches back.
const batchTimeout = 10 * time.Second

// call is one request waiting in a batcher.
type call[T, R any] struct {
	in   T
	out  R
	ok   bool // false: the batch gave the request back for the precise path
	err  error
	done chan struct{}
}

// batcher combines concurrent calls into batches run by run.
type batcher[T, R any] struct {
	run func(ctx context.Context, calls []*call[T, R])
	// serial, when set, is held while a batch runs: shared by the
	// ledger's batchers, it runs one batch at a time.
	serial *sync.Mutex

	mu      sync.Mutex
	pending []*call[T, R]
	running bool

	// batches and calls count what was run, handled what the batches did
	// (the rest took the precise path), for tests and metrics.
	batches, calls, handled atomic.Int64
}

// do queues in, starts the batches' goroutine if none runs, and returns
// in's result: ok false means the batch did not handle it. When ctx ends
// first, do returns at once: with ctx's cause when the call was withdrawn
// before its batch took it, with ErrOutcomeUnknown when its batch runs.
func (b *batcher[T, R]) do(ctx context.Context, in T) (R, bool, error) {
	c := &call[T, R]{in: in, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	if !b.running {
		b.running = true
		go b.drain()
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.out, c.ok, c.err
	case <-ctx.Done():
	}
	var zero R
	b.mu.Lock()
	if i := slices.Index(b.pending, c); i >= 0 {
		b.pending = slices.Delete(b.pending, i, i+1)
		b.mu.Unlock()
		return zero, false, fmt.Errorf("batch not run: %w", context.Cause(ctx))
	}
	b.mu.Unlock()
	select {
	case <-c.done: // the batch answered meanwhile
		return c.out, c.ok, c.err
	default:
		return zero, false, fmt.Errorf("%w: %w", ErrOutcomeUnknown, context.Cause(ctx))
	}
}

// drain runs batches until no call waits.
func (b *batcher[T, R]) drain() {
	for b.runNext() {
	}
}

// runNext runs one batch of the calls waiting, alone among the ledger's
// batches when serial is set, within batchTimeout of when it starts; it
// reports false, and ends the batches' goroutine, when none waits.
func (b *batcher[T, R]) runNext() bool {
	if b.serial != nil {
		b.serial.Lock()
		defer b.serial.Unlock()
	}
	b.mu.Lock()
	if len(b.pending) == 0 {
		b.running = false
		b.mu.Unlock()
		return false
	}
	n := min(len(b.pending), maxBatch)
	batch := slices.Clone(b.pending[:n])
	b.pending = slices.Delete(b.pending, 0, n)
	b.mu.Unlock()
	b.batches.Add(1)
	b.calls.Add(int64(n))
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	b.run(ctx, batch)
	cancel()
	for _, bc := range batch {
		if bc.ok {
			b.handled.Add(1)
		}
		close(bc.done)
	}
	return true
}

// reserveBatchSQL reserves a batch in one statement. The requests come as
// arrays, one element each. For every team it locks the team's row (in id
// order, so two batches never wait on each other in a cycle), holds the sum
// of the team's estimates only while its available balance covers the sum,
// and inserts the rows of the teams it held for. The output is clamped and
// priced by the rules' SQL renderings (rules.go). A request the statement
// leaves out (its team could not cover the batch, its model is unknown,
// its prompt does not fit) is not in the answer; a duplicate request id or
// a key that is gone fails the statement, and with it the batch. Each row
// answered carries its team's available balance after the batch's holds.
var reserveBatchSQL = `WITH r AS (
	SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[])
		AS r(request_id, team_id, model, prompt_tokens, max_tokens, key_id)
), m AS (
	SELECT r.*, prompt_price_micro_per_mtok AS pp, completion_price_micro_per_mtok AS cp,
		` + clampSQL("r.prompt_tokens", "r.max_tokens", "max_context_tokens", "max_output_tokens") + ` AS max_out
	FROM r JOIN models ON models.name = r.model AND ` + fitsContextSQL("r.prompt_tokens", "max_context_tokens") + `
), e AS (
	SELECT m.*, ` + costSQL("m.prompt_tokens", "max_out", "pp", "cp") + ` AS est
	FROM m
), need AS (
	SELECT team_id, sum(est) AS total FROM e GROUP BY team_id
), locked AS (
	SELECT t.id FROM teams t WHERE t.id IN (SELECT team_id FROM need) ORDER BY t.id FOR UPDATE
), hold AS (
	UPDATE teams t SET reserved_microcredits = t.reserved_microcredits + need.total
	FROM need JOIN locked ON locked.id = need.team_id
	WHERE t.id = need.team_id AND t.balance_microcredits - t.reserved_microcredits >= need.total
	RETURNING t.id, t.balance_microcredits - t.reserved_microcredits AS avail
), ins AS (
	INSERT INTO usage_ledger
		(request_id, team_id, key_id, model, reserved_microcredits, prompt_price_micro_per_mtok,
		 completion_price_micro_per_mtok, max_output_tokens, status, created_at, prompt_tokens)
	SELECT e.request_id, e.team_id, NULLIF(e.key_id, 0), e.model, e.est, e.pp, e.cp, e.max_out, 'reserved', $7, e.prompt_tokens
	FROM e JOIN hold ON hold.id = e.team_id
	RETURNING request_id, team_id, reserved_microcredits, max_output_tokens
)
SELECT ins.request_id, ins.reserved_microcredits, ins.max_output_tokens, hold.avail
FROM ins JOIN hold ON hold.id = ins.team_id`

// reserveBatch runs one reservation batch; what it does not reserve is
// handed back (ok false) for the precise path.
func (l *Ledger) reserveBatch(ctx context.Context, calls []*call[Reservation, Reserved]) {
	n := len(calls)
	ids, teams, models := make([]string, n), make([]int64, n), make([]string, n)
	prompts, maxTokens, keys := make([]int64, n), make([]int64, n), make([]int64, n)
	byID := make(map[string]*call[Reservation, Reserved], n)
	for i, c := range calls {
		r := c.in
		ids[i], teams[i], models[i], prompts[i], maxTokens[i], keys[i] = r.RequestID, r.TeamID, r.Model, r.PromptTokens, r.MaxOutputTokens, r.KeyID
		if _, dup := byID[r.RequestID]; dup {
			return // the same request twice at once: the precise path decides
		}
		byID[r.RequestID] = c
	}
	rows, err := l.db.QueryContext(ctx, reserveBatchSQL, ids, teams, models, prompts, maxTokens, keys, l.now())
	if err != nil {
		return // a constraint (duplicate, gone key) or the database: one by one
	}
	defer rows.Close()
	type got struct {
		id              string
		est, out, avail int64
	}
	var done []got
	for rows.Next() {
		var g got
		if err := rows.Scan(&g.id, &g.est, &g.out, &g.avail); err != nil {
			l.failBatch(calls, fmt.Errorf("reserve batch: %w", err))
			return
		}
		done = append(done, g)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		// The statement failed as a whole (a constraint found late): it
		// committed nothing, so every request goes on alone.
		return
	}
	for _, g := range done {
		if c := byID[g.id]; c != nil {
			c.out, c.ok = Reserved{RequestID: g.id, Microcredits: g.est, MaxOutputTokens: g.out, Available: g.avail}, true
		}
	}
}

// failBatch gives every call of a batch err: the batch's outcome is unknown
// (its commit may or may not have happened), so the callers must not guess.
func (l *Ledger) failBatch(calls []*call[Reservation, Reserved], err error) {
	for _, c := range calls {
		c.err = err
	}
}

// finishReq is a settle or cancel waiting in a batch.
type finishReq struct {
	requestID string
	status    string // StatusSettled or StatusCancelled
	src       Source
	usage     Usage
	// timing is how the answer came (SettleTimed); nil: not timed.
	timing *Timing
}

// finishBatchSQL settles and cancels a batch in one statement, by the rules
// of finish, each rendered from its Go function (rules.go): it locks the batch's reserved rows (in id order), bounds the
// usage by each row's reservation as BoundUsage does with nothing relayed
// (b: negative counts are zero, the completion at most the output cap, the
// prompt at most the estimate plus the cap less the completion), applies
// the partial rule (nothing produced cancels; output without a prompt count
// bills the reservation's prompt estimate), prices each row at its reserved
// prices capped at its reservation, moves the rows out of 'reserved', and
// debits each team once by its rows' costs and releases their holds (team
// rows locked in id order). Rows not reserved any more are left out of the
// answer. The rows it settles go into the usage rollup in one grouped
// upsert, after the teams' rows are locked (rollup), and the setting
// llmplat.rollup_by_statement tells the rollup's row trigger to leave them
// (migration 0007): one upsert per team, day, model and key, not one per
// row; the latency rollup likewise (latency, migration 0009), with each
// settled row's timing (SettleTimed) written on the row.
var finishBatchSQL = `WITH s AS (
	SELECT request_id, status, NULLIF(src, '')::settle_source AS src, pt, ct,
		NULLIF(ttft, -1) AS ttft, NULLIF(gen, -1) AS gen, NULLIF(queue, -1) AS queue
	FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $7::bigint[], $8::bigint[], $9::bigint[])
		AS s(request_id, status, src, pt, ct, ttft, gen, queue)
), rows AS (
	SELECT u.id, u.request_id, u.team_id, u.key_id, u.model, u.reserved_microcredits AS reserved,
		u.prompt_price_micro_per_mtok AS pp, u.completion_price_micro_per_mtok AS cp, u.prompt_tokens AS est_prompt,
		u.max_output_tokens AS mo, s.status, s.src, s.pt AS rpt, s.ct AS rct, s.ttft, s.gen, s.queue
	FROM usage_ledger u JOIN s ON s.request_id = u.request_id
	-- The rows are read by the request_id index (= ANY). status is
	-- compared as text so that the planner, which sees few reserved rows,
	-- cannot pick the sweeper's (status, created_at) index instead: it
	-- holds an entry for every dead version of every settled row.
	WHERE u.request_id = ANY($1::text[]) AND u.status::text = 'reserved'
	ORDER BY u.id FOR UPDATE OF u
), bc AS (
	SELECT rows.*, ` + boundCompletionSQL("rct", "mo") + ` AS ct
	FROM rows
), b AS (
	SELECT bc.*, ` + boundPromptSQL("rpt", "est_prompt", "mo", "ct") + ` AS pt,
		` + negativeSQL("rpt", "rct") + ` AS negative
	FROM bc
), p AS (
	SELECT b.*, ` + overReservedSQL("rpt", "rct", "pt", "ct") + ` AS over,
		CASE WHEN status = 'settled' AND ` + partialSourceSQL("src") + ` AND ` + partialNothingSQL("pt", "ct") + `
			THEN 'cancelled' ELSE status END AS final
	FROM b
), q AS (
	SELECT p.*,
		CASE WHEN final = 'cancelled' THEN 0 WHEN ` + partialSourceSQL("src") + ` THEN ` + partialPromptSQL("pt", "est_prompt") + ` ELSE pt END AS fpt,
		CASE WHEN final = 'cancelled' THEN 0 ELSE ct END AS fct
	FROM p
), c AS (
	SELECT q.*, CASE WHEN final = 'cancelled' THEN 0 ELSE ` + costSQL("fpt", "fct", "pp", "cp") + ` END AS full_cost
	FROM q
), upd AS (
	UPDATE usage_ledger u SET status = c.final::usage_status,
		settled_from = CASE WHEN c.final = 'settled' THEN c.src END,
		prompt_tokens = c.fpt, completion_tokens = c.fct, cost_microcredits = ` + chargeSQL("c.full_cost", "c.reserved") + `, settled_at = $6,
		ttft_ms = CASE WHEN c.final = 'settled' THEN c.ttft END,
		generation_ms = CASE WHEN c.final = 'settled' THEN c.gen END,
		queue_ms = CASE WHEN c.final = 'settled' THEN c.queue END
	FROM c WHERE u.id = c.id AND u.status::text = 'reserved'
	RETURNING u.id, u.request_id, u.team_id, COALESCE(u.key_id, 0) AS key_id, u.model, u.status,
		COALESCE(u.settled_from::text, '') AS settled_from, u.prompt_tokens, u.completion_tokens, u.cost_microcredits,
		(` + chargeCappedSQL("c.full_cost", "c.reserved") + ` OR c.over) AND c.final = 'settled' AS capped, c.full_cost, c.reserved,
		c.over, c.negative, c.rpt, c.rct, u.created_at, u.ttft_ms, u.generation_ms, u.queue_ms
), per_team AS (
	SELECT team_id, sum(cost_microcredits) AS cost, sum(reserved) AS released FROM upd GROUP BY team_id
), locked AS (
	SELECT t.id FROM teams t WHERE t.id IN (SELECT team_id FROM per_team) ORDER BY t.id FOR UPDATE
), debit AS (
	UPDATE teams t SET balance_microcredits = t.balance_microcredits - per_team.cost,
		reserved_microcredits = t.reserved_microcredits - per_team.released
	FROM per_team JOIN locked ON locked.id = per_team.team_id
	WHERE t.id = per_team.team_id
	RETURNING t.id, t.balance_microcredits
), by_statement AS (
	SELECT set_config('llmplat.rollup_by_statement', 'on', true) AS flag
), rollup AS (
	INSERT INTO usage_daily AS d (team_id, day, model, key_id, requests, prompt_tokens, completion_tokens, cost_microcredits)
	SELECT upd.team_id, to_char(upd.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), upd.model, upd.key_id, count(*),
		sum(upd.prompt_tokens), sum(upd.completion_tokens), sum(upd.cost_microcredits)
	FROM upd JOIN debit ON debit.id = upd.team_id CROSS JOIN by_statement
	WHERE upd.status = 'settled'
	GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
	ON CONFLICT (team_id, day, model, key_id) DO UPDATE SET requests = d.requests + EXCLUDED.requests,
		prompt_tokens = d.prompt_tokens + EXCLUDED.prompt_tokens,
		completion_tokens = d.completion_tokens + EXCLUDED.completion_tokens,
		cost_microcredits = d.cost_microcredits + EXCLUDED.cost_microcredits
), latency AS (
	INSERT INTO latency_hourly AS d (team_id, hour, model, key_id, requests, timed, timed_completion_tokens, generation_ms, ttft_b00, ttft_b01, ttft_b02, ttft_b03, ttft_b04, ttft_b05, ttft_b06, ttft_b07, ttft_b08, ttft_b09, ttft_b10, ttft_b11, ttft_b12, ttft_b13, ttft_b14, ttft_b15, queue_b00, queue_b01, queue_b02, queue_b03, queue_b04, queue_b05, queue_b06, queue_b07, queue_b08, queue_b09, queue_b10, queue_b11, queue_b12, queue_b13, queue_b14, queue_b15)
	SELECT upd.team_id, to_char(upd.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24'), upd.model, upd.key_id,
		sum(1),
		sum((upd.ttft_ms IS NOT NULL)::int),
		sum(CASE WHEN upd.ttft_ms IS NOT NULL THEN upd.completion_tokens ELSE 0 END),
		sum(COALESCE(upd.generation_ms, 0)),
		sum(COALESCE((upd.ttft_ms < 10)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 10 AND upd.ttft_ms < 25)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 25 AND upd.ttft_ms < 50)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 50 AND upd.ttft_ms < 100)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 100 AND upd.ttft_ms < 200)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 200 AND upd.ttft_ms < 300)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 300 AND upd.ttft_ms < 500)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 500 AND upd.ttft_ms < 750)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 750 AND upd.ttft_ms < 1000)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 1000 AND upd.ttft_ms < 1500)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 1500 AND upd.ttft_ms < 2000)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 2000 AND upd.ttft_ms < 3000)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 3000 AND upd.ttft_ms < 5000)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 5000 AND upd.ttft_ms < 10000)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 10000 AND upd.ttft_ms < 30000)::int, 0)),
		sum(COALESCE((upd.ttft_ms >= 30000)::int, 0)),
		sum(COALESCE((upd.queue_ms < 10)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 10 AND upd.queue_ms < 25)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 25 AND upd.queue_ms < 50)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 50 AND upd.queue_ms < 100)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 100 AND upd.queue_ms < 200)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 200 AND upd.queue_ms < 300)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 300 AND upd.queue_ms < 500)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 500 AND upd.queue_ms < 750)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 750 AND upd.queue_ms < 1000)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 1000 AND upd.queue_ms < 1500)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 1500 AND upd.queue_ms < 2000)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 2000 AND upd.queue_ms < 3000)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 3000 AND upd.queue_ms < 5000)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 5000 AND upd.queue_ms < 10000)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 10000 AND upd.queue_ms < 30000)::int, 0)),
		sum(COALESCE((upd.queue_ms >= 30000)::int, 0))
	FROM upd JOIN debit ON debit.id = upd.team_id CROSS JOIN by_statement
	WHERE upd.status = 'settled'
	GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
	ON CONFLICT (team_id, hour, model, key_id) DO UPDATE SET
		requests = d.requests + EXCLUDED.requests,
		timed = d.timed + EXCLUDED.timed,
		timed_completion_tokens = d.timed_completion_tokens + EXCLUDED.timed_completion_tokens,
		generation_ms = d.generation_ms + EXCLUDED.generation_ms,
		ttft_b00 = d.ttft_b00 + EXCLUDED.ttft_b00,
		ttft_b01 = d.ttft_b01 + EXCLUDED.ttft_b01,
		ttft_b02 = d.ttft_b02 + EXCLUDED.ttft_b02,
		ttft_b03 = d.ttft_b03 + EXCLUDED.ttft_b03,
		ttft_b04 = d.ttft_b04 + EXCLUDED.ttft_b04,
		ttft_b05 = d.ttft_b05 + EXCLUDED.ttft_b05,
		ttft_b06 = d.ttft_b06 + EXCLUDED.ttft_b06,
		ttft_b07 = d.ttft_b07 + EXCLUDED.ttft_b07,
		ttft_b08 = d.ttft_b08 + EXCLUDED.ttft_b08,
		ttft_b09 = d.ttft_b09 + EXCLUDED.ttft_b09,
		ttft_b10 = d.ttft_b10 + EXCLUDED.ttft_b10,
		ttft_b11 = d.ttft_b11 + EXCLUDED.ttft_b11,
		ttft_b12 = d.ttft_b12 + EXCLUDED.ttft_b12,
		ttft_b13 = d.ttft_b13 + EXCLUDED.ttft_b13,
		ttft_b14 = d.ttft_b14 + EXCLUDED.ttft_b14,
		ttft_b15 = d.ttft_b15 + EXCLUDED.ttft_b15,
		queue_b00 = d.queue_b00 + EXCLUDED.queue_b00,
		queue_b01 = d.queue_b01 + EXCLUDED.queue_b01,
		queue_b02 = d.queue_b02 + EXCLUDED.queue_b02,
		queue_b03 = d.queue_b03 + EXCLUDED.queue_b03,
		queue_b04 = d.queue_b04 + EXCLUDED.queue_b04,
		queue_b05 = d.queue_b05 + EXCLUDED.queue_b05,
		queue_b06 = d.queue_b06 + EXCLUDED.queue_b06,
		queue_b07 = d.queue_b07 + EXCLUDED.queue_b07,
		queue_b08 = d.queue_b08 + EXCLUDED.queue_b08,
		queue_b09 = d.queue_b09 + EXCLUDED.queue_b09,
		queue_b10 = d.queue_b10 + EXCLUDED.queue_b10,
		queue_b11 = d.queue_b11 + EXCLUDED.queue_b11,
		queue_b12 = d.queue_b12 + EXCLUDED.queue_b12,
		queue_b13 = d.queue_b13 + EXCLUDED.queue_b13,
		queue_b14 = d.queue_b14 + EXCLUDED.queue_b14,
		queue_b15 = d.queue_b15 + EXCLUDED.queue_b15
)
SELECT upd.request_id, upd.team_id, upd.key_id, upd.model, upd.status, upd.settled_from,
	upd.prompt_tokens, upd.completion_tokens, upd.cost_microcredits, upd.capped, upd.full_cost, upd.reserved,
	upd.over, upd.negative, upd.rpt, upd.rct, debit.balance_microcredits
FROM upd JOIN debit ON debit.id = upd.team_id
ORDER BY upd.id`

// finishBatch runs one settle/cancel batch; rows it did not move are
// handed back (ok false) for the precise path, which answers for a row
// already finished or unknown.
func (l *Ledger) finishBatch(ctx context.Context, calls []*call[finishReq, Outcome]) {
	n := len(calls)
	ids, statuses, srcs := make([]string, n), make([]string, n), make([]string, n)
	pts, cts := make([]int64, n), make([]int64, n)
	// The timing's milliseconds, -1 for a call without one (NULL).
	ttfts, gens, queues := make([]int64, n), make([]int64, n), make([]int64, n)
	byID := make(map[string]*call[finishReq, Outcome], n)
	for i, c := range calls {
		f := c.in
		if _, dup := byID[f.requestID]; dup {
			return // one row settled twice at once: the precise path decides
		}
		byID[f.requestID] = c
		ids[i], statuses[i], srcs[i], pts[i], cts[i] = f.requestID, f.status, string(f.src), f.usage.PromptTokens, f.usage.CompletionTokens
		ttfts[i], gens[i], queues[i] = -1, -1, -1
		if f.timing != nil {
			ttfts[i], gens[i], queues[i] = f.timing.millis()
		}
	}
	rows, err := l.db.QueryContext(ctx, finishBatchSQL, ids, statuses, srcs, pts, cts, l.now(), ttfts, gens, queues)
	if err != nil {
		return // a deadlock or the database: one by one
	}
	defer rows.Close()
	type got struct {
		out             Outcome
		full, reserved  int64
		balanceAfterAll int64
		reported        Usage
	}
	var done []got
	for rows.Next() {
		var g got
		var settledFrom string
		var over, negative bool
		o := &g.out
		if err := rows.Scan(&o.RequestID, &o.TeamID, &o.KeyID, &o.Model, &o.Status, &settledFrom,
			&o.Usage.PromptTokens, &o.Usage.CompletionTokens, &o.CostMicrocredits, &o.Capped, &g.full, &g.reserved,
			&over, &negative, &g.reported.PromptTokens, &g.reported.CompletionTokens, &g.balanceAfterAll); err != nil {
			for _, c := range calls {
				c.err = fmt.Errorf("finish batch: %w", err)
			}
			return
		}
		o.Applied = true
		if over {
			o.Corrected |= OverReserved
		}
		if negative {
			o.Corrected |= Negative
		}
		done = append(done, g)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return // the statement failed as a whole and committed nothing
	}
	// Overdrawn as finish reports it: the team's balance after this row's
	// debit (the batch debits in id order) is below zero.
	after := map[int64]int64{}
	for i := len(done) - 1; i >= 0; i-- {
		g := &done[i]
		bal, seen := after[g.out.TeamID]
		if !seen {
			bal = g.balanceAfterAll
		}
		g.out.Overdrawn = g.out.CostMicrocredits > 0 && bal < 0
		after[g.out.TeamID] = bal + g.out.CostMicrocredits
	}
	for _, g := range done {
		c := byID[g.out.RequestID]
		if c == nil {
			continue
		}
		if g.full > g.reserved && g.out.Status == StatusSettled {
			l.cfg.Logger.Warn("settle capped at the reservation: the usage cost more than was reserved",
				"request_id", g.out.RequestID, "team_id", g.out.TeamID, "source", string(c.in.src),
				"prompt_tokens", g.out.Usage.PromptTokens, "completion_tokens", g.out.Usage.CompletionTokens,
				"cost_microcredits", g.full, "reserved_microcredits", g.reserved)
		}
		if g.out.Overdrawn {
			l.cfg.Logger.Warn("settle overdrew a team: its balance was lowered while the request ran",
				"request_id", g.out.RequestID, "team_id", g.out.TeamID, "cost_microcredits", g.out.CostMicrocredits)
		}
		// As finish reports it: the source asked for, also when the
		// partial rule cancelled the row.
		g.out.Source = c.in.src
		if g.out.Corrected != 0 {
			l.logCorrected(g.out, g.reported)
		}
		c.out, c.ok = g.out, true
	}
}
