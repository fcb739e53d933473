package quota

import (
	"context"
	"fmt"
	"time"
)

// entry is one request's place in a model's queue.
type entry struct {
	model string
	value string // "<request_id> <deadline_ms>", the sorted set's member
	seq   int64  // its score: the arrival number
}

// turnState is where an entry stands, from turnScript.
type turnState int64

const (
	turnHead    turnState = 0 // at the head; it has stepped out to try
	turnBehind  turnState = 1 // waiting behind others
	turnExpired turnState = 2 // its deadline passed; it is gone
)

// turn is turnScript's answer.
type turn struct {
	state    turnState
	headLeft time.Duration // turnBehind: time until the head's deadline
}

// enqueue appends requestID to model's queue.
func (q *Queue) enqueue(ctx context.Context, model, requestID string, limit time.Duration) (entry, error) {
	r, err := enqueueScript.Run(ctx, q.rdb, []string{q.keys.Queue(model), q.keys.QueueSeq(model)},
		requestID, millis(limit), q.keys.QueueWake(model)).Slice()
	if err != nil {
		return entry{}, fmt.Errorf("enqueue for %s: %w", model, err)
	}
	if len(r) != 2 {
		return entry{}, fmt.Errorf("enqueue for %s: unexpected reply %v", model, r)
	}
	value, ok1 := r[0].(string)
	seq, ok2 := r[1].(int64)
	if !ok1 || !ok2 {
		return entry{}, fmt.Errorf("enqueue for %s: unexpected reply %v", model, r)
	}
	return entry{model: model, value: value, seq: seq}, nil
}

// turn reports where e stands and, at the head, takes it out to try.
func (q *Queue) turn(ctx context.Context, e entry) (turn, error) {
	cmd := turnScript.Run(ctx, q.rdb, []string{q.keys.Queue(e.model), q.keys.QueueSeq(e.model), q.keys.QueueMissed(e.model)},
		e.value, e.seq, q.keys.QueueWake(e.model))
	r, err := ints(cmd, 2)
	if err != nil {
		return turn{}, fmt.Errorf("queue turn for %s: %w", e.model, err)
	}
	return turn{state: turnState(r[0]), headLeft: time.Duration(r[1]) * time.Millisecond}, nil
}

// reinsertion is reinsert's answer.
type reinsertion int

const (
	reinsertExpired reinsertion = 0 // its deadline passed meanwhile
	reinsertBack    reinsertion = 1 // back at its place
	reinsertAgain   reinsertion = 2 // back, and a wake-up came while it tried
)

// reinsert puts e back at its place after a failed try.
func (q *Queue) reinsert(ctx context.Context, e entry) (reinsertion, error) {
	n, err := reinsertScript.Run(ctx, q.rdb, []string{q.keys.Queue(e.model), q.keys.QueueSeq(e.model), q.keys.QueueMissed(e.model)},
		e.value, e.seq).Int64()
	if err != nil {
		return reinsertExpired, fmt.Errorf("requeue for %s: %w", e.model, err)
	}
	if n < 0 || n > 2 {
		return reinsertExpired, fmt.Errorf("requeue for %s: unexpected reply %d", e.model, n)
	}
	return reinsertion(n), nil
}

// leave removes e from its queue and wakes the next head if e was the head.
func (q *Queue) leave(ctx context.Context, e entry) error {
	err := leaveScript.Run(ctx, q.rdb, []string{q.keys.Queue(e.model)}, e.value, q.keys.QueueWake(e.model)).Err()
	if err != nil {
		return fmt.Errorf("leave queue %s: %w", e.model, err)
	}
	return nil
}

// wakeHead wakes model's head on behalf of a request that is leaving or
// trying. It is best effort, with its own timeout so it runs after the
// client has gone: a lost wake-up costs the next waiter one poll interval.
func (q *Queue) wakeHead(ctx context.Context, model string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_ = q.Notify(ctx, model)
}
