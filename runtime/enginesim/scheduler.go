package enginesim

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/openai"
)

// Errors a sequence can be failed with.
var (
	// ErrEngineDead is the injected engine death.
	ErrEngineDead = errors.New("engine dead")
	// ErrStopped means the engine was shut down.
	ErrStopped = errors.New("engine stopped")
)

// scheduler is the engine core: the waiting queue, the running batch and
// the KV blocks, with vLLM's scheduling rules. Only the engine goroutine
// calls plan and commit; handlers call submit and abort. Everything is
// guarded by mu, held only for short, non-blocking work.
type scheduler struct {
	dep         capacity.Deployment
	blockSize   int64
	totalBlocks int64
	maxSeqs     int
	maxBatched  int64
	clock       Clock
	m           *metrics
	// wake tells an idle engine goroutine there is work: size 1 so a
	// submit never blocks and a wake-up is never lost.
	wake chan struct{}

	mu         sync.Mutex
	freeBlocks int64
	waiting    []*sequence // FCFS; preempted sequences go back to the front
	running    []*sequence // in admission order
	batch      []*sequence // planned by plan, emitted by commit
	dieAfter   int64
	dead       bool
	stopped    bool
	stats      Stats
}

func newScheduler(cfg Config, m *metrics) *scheduler {
	blocks := cfg.Deployment.KVCapacityBlocks()
	c := &scheduler{
		dep:         cfg.Deployment,
		blockSize:   int64(cfg.Deployment.BlockSize),
		totalBlocks: blocks,
		maxSeqs:     cfg.MaxNumSeqs,
		maxBatched:  cfg.MaxNumBatchedTokens,
		clock:       cfg.Clock,
		m:           m,
		wake:        make(chan struct{}, 1),
		freeBlocks:  blocks,
		dieAfter:    cfg.Faults.DieAfterTokens,
		dead:        cfg.Faults.Dead,
	}
	c.publish()
	return c
}

func (c *scheduler) blocksFor(tokens int64) int64 {
	return (tokens + c.blockSize - 1) / c.blockSize
}

// submit queues a sequence, or fails when the engine is dead or stopped.
func (c *scheduler) submit(s *sequence) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.stopped:
		return ErrStopped
	case c.dead:
		return ErrEngineDead
	}
	s.state = stateWaiting
	c.waiting = append(c.waiting, s)
	c.publish()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// plan schedules the next step and returns its duration; false when there
// is nothing to do. Running sequences come first, oldest first, each with
// room for one more token; when a block is needed and none is free the most
// recently admitted sequence is preempted. Then, unless this step
// preempted, waiting sequences are admitted in order while they fit.
func (c *scheduler) plan() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead || c.stopped {
		return 0, false
	}
	c.batch = c.batch[:0]
	var decodeKV, prefill int64
	preempted := false
	for i := 0; i < len(c.running); i++ {
		s := c.running[i]
		need := c.blocksFor(s.contextTokens()+1) - s.blocks
		for need > c.freeBlocks && i < len(c.running) {
			c.preemptLast()
			preempted = true
		}
		if i == len(c.running) {
			break // s itself was preempted
		}
		c.freeBlocks -= need
		s.blocks += need
		decodeKV += s.contextTokens()
		c.batch = append(c.batch, s)
	}
	for !preempted && len(c.waiting) > 0 && len(c.running) < c.maxSeqs {
		s := c.waiting[0]
		tokens := s.contextTokens()
		need := c.blocksFor(tokens + 1)
		if need > c.freeBlocks || (prefill > 0 && prefill+tokens > c.maxBatched) {
			break
		}
		c.waiting = c.waiting[1:]
		c.freeBlocks -= need
		s.blocks = need
		s.state = stateRunning
		c.running = append(c.running, s)
		c.batch = append(c.batch, s)
		prefill += tokens
		if !s.scheduled {
			s.scheduled = true
			c.m.queueTime.Observe(c.now().Sub(s.arrival).Seconds())
		}
	}
	c.publish()
	if len(c.batch) == 0 {
		// A lone sequence preempted itself: the next plan re-admits it.
		return 0, preempted
	}
	return c.dep.DecodeStep(decodeKV) + c.dep.Prefill(prefill), true
}

// preemptLast preempts the most recently admitted running sequence: its
// blocks are freed and it goes to the front of the waiting queue, to be
// recomputed (prompt and tokens generated so far) when admitted again.
func (c *scheduler) preemptLast() {
	s := c.running[len(c.running)-1]
	c.running = c.running[:len(c.running)-1]
	c.freeBlocks += s.blocks
	s.blocks = 0
	s.state = stateWaiting
	c.waiting = slices.Insert(c.waiting, 0, s)
	c.stats.Preemptions++
	c.m.preemptions.Inc()
}

// commit emits the planned step's token for every sequence still running,
// stamped at the step's end.
func (c *scheduler) commit(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.batch {
		if s.state != stateRunning {
			continue // aborted, or the engine died, during the step
		}
		c.emit(s, at)
		if c.dead {
			break
		}
	}
	c.batch = c.batch[:0]
	c.stats.Steps++
	c.publish()
}

func (c *scheduler) emit(s *sequence, at time.Time) {
	text := s.gen.next(s.generated == 0)
	s.generated++
	c.stats.GenerationTokens++
	c.m.generationTokens.Inc()
	if s.generated == 1 {
		c.stats.PromptTokens += s.prompt
		c.m.promptTokens.Add(float64(s.prompt))
		c.m.ttft.Observe(at.Sub(s.arrival).Seconds())
	} else {
		c.m.itl.Observe(at.Sub(s.lastToken).Seconds())
	}
	s.lastToken = at
	finish := ""
	switch {
	case s.generated >= s.maxTokens:
		finish = openai.FinishLength
	case !s.ignoreEOS && s.generated >= s.target:
		finish = openai.FinishStop
	}
	s.out.push(text, finish)
	if finish != "" {
		c.release(s)
		s.state = stateFinished
		c.stats.Finished++
		c.m.finished(s, finish, at)
	}
	if c.dieAfter > 0 && s.generated >= c.dieAfter {
		c.failAll(ErrEngineDead)
		c.dead = true
	}
}

// detach takes s out of the schedule if it is still waiting or running,
// freeing its KV, and reports whether it was; c.mu is held.
func (c *scheduler) detach(s *sequence) bool {
	switch s.state {
	case stateWaiting:
		c.waiting = slices.DeleteFunc(c.waiting, func(x *sequence) bool { return x == s })
	case stateRunning:
		c.release(s)
	default:
		return false
	}
	return true
}

// abort ends a sequence whose client went away and frees its KV at once;
// the gauges move now, not at the next step.
func (c *scheduler) abort(s *sequence) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.detach(s) {
		return
	}
	s.state = stateAborted
	c.stats.Aborted++
	c.m.finished(s, openai.FinishAbort, c.now())
	c.publish()
}

// release takes a running sequence out of the batch and frees its blocks.
func (c *scheduler) release(s *sequence) {
	c.running = slices.DeleteFunc(c.running, func(x *sequence) bool { return x == s })
	c.freeBlocks += s.blocks
	s.blocks = 0
}

// publish sets the stats snapshot, which the state gauges read; called
// with mu held after every change.
func (c *scheduler) publish() {
	c.stats.Running = len(c.running)
	c.stats.Waiting = len(c.waiting)
	c.stats.KVBlocksUsed = c.totalBlocks - c.freeBlocks
	c.stats.KVBlocksTotal = c.totalBlocks
}

// now is the simulated time, for events that happen between steps.
func (c *scheduler) now() time.Time { return c.clock.Now() }
