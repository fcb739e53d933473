package quota

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxPipeline bounds the script calls one pipeline carries.
const maxPipeline = 256

// pipeliner sends the scripts of concurrent requests together: calls that
// arrive while a pipeline is out wait and go in the next one, in one write
// and one read on each side. A request's admission and its end are a round
// trip each; under load, the round trips of many requests become one (the
// quota's group commit), which spares Redis and the gateway a syscall pair
// per call. Alone, a call goes out at once, as it would without this.
//
// There is no background goroutine: a caller that finds no pipeline out
// sends one (the leader) with everything waiting; when it returns, the
// first of the calls that queued meanwhile, if any, leads the next. No
// caller sends more than one pipeline. A caller whose context ends while
// it waits leaves the queue, unsent; once sent, it waits for its pipeline,
// which ends by the earliest deadline among its callers.
type pipeliner struct {
	rdb redis.UniversalClient

	mu      sync.Mutex
	pending []*pipeCall
	out     bool // a pipeline is out, or its successor is about to lead

	// pipelines and calls count what was sent, for tests.
	pipelines, calls atomic.Int64
}

// pipeCall is one caller's scripts, waiting for a pipeline.
type pipeCall struct {
	calls    []scriptCall
	deadline time.Time // zero: none
	cmds     []*redis.Cmd
	err      error
	// lead, when set on wake-up, makes the caller send the next pipeline.
	lead bool
	done chan struct{}
}

// run runs calls in a pipeline, with other callers' when they wait too,
// and returns their commands and errors as runScripts does. A caller whose
// context ends before its pipeline is sent leaves the queue: nil commands
// and the context's error, and Redis saw nothing of it.
func (p *pipeliner) run(ctx context.Context, calls []scriptCall) ([]*redis.Cmd, error) {
	c := &pipeCall{calls: calls, done: make(chan struct{})}
	c.deadline, _ = ctx.Deadline()
	p.mu.Lock()
	p.pending = append(p.pending, c)
	if !p.out {
		p.out = true
		p.mu.Unlock()
		p.send(ctx)
		return c.cmds, c.err
	}
	p.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		p.mu.Lock()
		if i := slices.Index(p.pending, c); i >= 0 && !c.lead {
			p.pending = slices.Delete(p.pending, i, i+1)
			p.mu.Unlock()
			return nil, fmt.Errorf("quota pipeline: %w", context.Cause(ctx))
		}
		p.mu.Unlock()
		<-c.done // sent, or chosen to lead: see it through
	}
	if c.lead {
		p.send(ctx) // c's own calls are in the batch it sends
	}
	return c.cmds, c.err
}

// send sends everything pending in one pipeline, answers each caller, and
// hands the lead to the first caller that queued meanwhile. The pipeline
// is not cancelled with the sender's context; it ends by the earliest
// deadline of its callers, so that none waits past its own (a frozen
// Redis costs each caller at most its timeout, as a lone call would).
func (p *pipeliner) send(ctx context.Context) {
	p.mu.Lock()
	n := min(len(p.pending), maxPipeline)
	batch := p.pending[:n:n]
	p.pending = p.pending[n:]
	p.mu.Unlock()

	var all []scriptCall
	var deadline time.Time
	for _, c := range batch {
		all = append(all, c.calls...)
		if !c.deadline.IsZero() && (deadline.IsZero() || c.deadline.Before(deadline)) {
			deadline = c.deadline
		}
	}
	pctx := context.WithoutCancel(ctx)
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		pctx, cancel = context.WithDeadline(pctx, deadline)
		defer cancel()
	}
	p.pipelines.Add(1)
	p.calls.Add(int64(len(batch)))
	cmds, _ := runScripts(pctx, p.rdb, all)
	for _, c := range batch {
		c.cmds, cmds = cmds[:len(c.calls):len(c.calls)], cmds[len(c.calls):]
		c.err = cmdErrors(c.cmds)
	}

	p.mu.Lock()
	var next *pipeCall
	if len(p.pending) > 0 {
		next = p.pending[0]
		next.lead = true
	} else {
		p.out = false
	}
	p.mu.Unlock()
	for _, c := range batch {
		if !c.lead { // a leader is not waiting; its done is closed already
			close(c.done)
		}
	}
	if next != nil {
		close(next.done)
	}
}
