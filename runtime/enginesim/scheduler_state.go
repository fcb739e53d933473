package enginesim

// This file holds the scheduler's ways out of normal operation: failing
// sequences when the engine dies or stops, reviving it, and the snapshot
// of its state.

// failOne fails a sequence that is still waiting or running.
func (c *scheduler) failOne(s *sequence, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.detach(s) {
		return
	}
	s.state = stateFailed
	s.out.fail(err)
	c.publish()
}

// failAll fails every waiting and running sequence with err.
func (c *scheduler) failAll(err error) {
	for _, list := range [][]*sequence{c.running, c.waiting} {
		for _, s := range list {
			s.state = stateFailed
			s.blocks = 0
			s.out.fail(err)
		}
	}
	c.running, c.waiting = nil, nil
	c.freeBlocks = c.totalBlocks
	c.publish()
}

// setDead kills or revives the engine.
func (c *scheduler) setDead(dead bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if dead && !c.dead {
		c.failAll(ErrEngineDead)
	}
	c.dead = dead
}

func (c *scheduler) setDieAfter(n int64) {
	c.mu.Lock()
	c.dieAfter = n
	c.mu.Unlock()
}

func (c *scheduler) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// stop fails every sequence and refuses new ones: the engine is shutting
// down.
func (c *scheduler) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.failAll(ErrStopped)
}

func (c *scheduler) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Stats is a snapshot of the engine's state and counters.
type Stats struct {
	Running int
	Waiting int
	// Hung counts the requests the hang fault holds now: taken, never
	// scheduled, so neither running nor waiting.
	Hung          int
	KVBlocksUsed  int64
	KVBlocksTotal int64
	// Steps counts committed engine steps.
	Steps int64
	// Counters since start: preemptions, prompt tokens of requests that got
	// a first token, generated tokens, requests finished with stop or
	// length, and requests aborted by their client.
	Preemptions      int64
	PromptTokens     int64
	GenerationTokens int64
	Finished         int64
	Aborted          int64
}
