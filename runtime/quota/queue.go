package quota

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"
)

// TryFunc attempts to start a queued request once it is its turn. It
// returns true when the request got capacity (it is then out of the
// queue), false when there is still none, or an error that ends the wait.
type TryFunc func(ctx context.Context) (bool, error)

// Queue is the per-model FIFO of requests that found no capacity, shared by
// every gateway replica through Redis.
//
// The queue is a sorted set scored by an arrival number from a per-model
// counter, rather than a list: an entry's place is its score, so the head
// can step out of the queue while it tries and, when the try fails, go back
// to exactly its place; and finding or removing one entry is O(log N)
// where a list needs O(N) LPOS and LREM. Each entry carries its own
// deadline, so anyone who reads the queue removes the entries of a crashed
// gateway once their limit has passed.
type Queue struct {
	rdb   redis.UniversalClient
	keys  Keys
	poll  time.Duration
	clock clock.WithDelayedExecution // runs the waits' timers

	hubMu sync.Mutex
	hub   *wakeHub // the shared subscriber, nil while nobody waits
}

// NewQueue returns a Queue on rdb.
func NewQueue(rdb redis.UniversalClient, cfg Config) (*Queue, error) {
	if rdb == nil {
		return nil, errors.New("quota: a redis client is required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Queue{rdb: rdb, keys: NewKeys(cfg.Prefix), poll: cfg.QueuePollInterval, clock: cfg.Clock}, nil
}

// Wait queues requestID at the tail of model's queue and waits its turn
// for at most limit. At the head of the queue it calls try; when try
// returns true Wait returns nil, when it returns an error Wait returns
// that error wrapped. Between attempts it sleeps until a wake-up for this
// request arrives on the model's wake channel (Notify, or the entry ahead
// leaving) or the poll interval passes. While try runs the request is out
// of the queue; if try takes longer than queueHandoff the next waiter is
// woken too, so a try that waits for its first token does not hold up the
// queue.
//
// It returns ErrQueueTimeout when limit passes, and the context's error
// when ctx ends (the client left). On every return the request's entry is
// gone, and every goroutine Wait started has ended. The waiters of a Queue
// share one pub/sub connection.
func (q *Queue) Wait(ctx context.Context, model, requestID string, limit time.Duration, try TryFunc) error {
	if err := checkName("model", model); err != nil {
		return err
	}
	if err := checkName("request id", requestID); err != nil {
		return err
	}
	if limit < time.Millisecond || try == nil {
		return fmt.Errorf("quota: wait needs a limit of at least 1 ms and a try function")
	}
	expired := q.clock.NewTimer(limit)
	defer expired.Stop()
	w, err := q.listen(ctx, model, requestID)
	if err != nil {
		return err
	}
	defer w.close()
	e, err := q.enqueue(ctx, model, requestID, limit)
	if err != nil {
		return err
	}
	return q.waitTurn(ctx, e, expired.C(), w.wake, try)
}

// waitTurn is Wait's loop once e is queued.
func (q *Queue) waitTurn(ctx context.Context, e entry, expired <-chan time.Time, wake <-chan struct{}, try TryFunc) error {
	poll := q.clock.NewTimer(q.poll)
	defer poll.Stop()
	for {
		select {
		case <-expired:
			return q.abandon(ctx, e, ErrQueueTimeout)
		default:
		}
		if err := ctx.Err(); err != nil {
			return q.abandon(ctx, e, err)
		}
		t, err := q.turn(ctx, e)
		if err != nil {
			return q.abandon(ctx, e, err)
		}
		switch t.state {
		case turnExpired:
			return ErrQueueTimeout
		case turnHead:
			done, again, err := q.attempt(ctx, e, try)
			if done || err != nil {
				return err
			}
			if again {
				continue
			}
		}
		sleep := q.poll
		if t.state == turnBehind && t.headLeft > 0 && t.headLeft < sleep {
			// The head may belong to a crashed gateway: look again the
			// moment it expires instead of a whole poll interval later.
			sleep = t.headLeft + time.Millisecond
		}
		poll.Reset(sleep)
		select {
		case <-ctx.Done():
			return q.abandon(ctx, e, ctx.Err())
		case <-expired:
			return q.abandon(ctx, e, ErrQueueTimeout)
		case <-wake:
		case <-poll.C():
		}
	}
}

// attempt runs try for e, which has stepped out of the queue. It reports
// done when the wait is over: try succeeded or failed with an error, or
// e's deadline passed while try ran. Otherwise e is back at its place, and
// again says a wake-up came while it tried: capacity it could not see may
// have freed, so it looks again now.
func (q *Queue) attempt(ctx context.Context, e entry, try TryFunc) (done, again bool, err error) {
	fired := make(chan struct{})
	handoff := q.clock.AfterFunc(queueHandoff, func() {
		defer close(fired)
		q.wakeHead(ctx, e.model)
	})
	ok, tryErr := func() (bool, error) {
		defer func() {
			if !handoff.Stop() {
				<-fired // the handoff's Redis call ends with this call
			}
		}()
		return try(ctx)
	}()
	if tryErr != nil || ok {
		// e is out of the queue for good: let the next waiter try.
		q.wakeHead(ctx, e.model)
		if tryErr != nil {
			return true, false, fmt.Errorf("queued request: %w", tryErr)
		}
		return true, false, nil
	}
	back, err := q.reinsert(ctx, e)
	if err != nil {
		return true, false, err
	}
	if back == reinsertExpired {
		return true, false, ErrQueueTimeout
	}
	return false, back == reinsertAgain, nil
}

// abandon takes e out of the queue after its client left or its limit
// passed, and returns cause (joined with a failure to leave).
func (q *Queue) abandon(ctx context.Context, e entry, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := q.leave(ctx, e); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// Notify wakes the head of model's queue, on whichever gateway replica it
// waits. The gateway calls it when a stream of model ends or a node of
// model gains room.
func (q *Queue) Notify(ctx context.Context, model string) error {
	if err := checkName("model", model); err != nil {
		return err
	}
	err := notifyScript.Run(ctx, q.rdb, q.keys.notifyKeys(model), q.keys.QueueWake(model), millis(missedWakeLife)).Err()
	if err != nil {
		return fmt.Errorf("notify queue %s: %w", model, err)
	}
	return nil
}

// Depth returns the number of requests waiting for model across all
// replicas, after removing expired entries: the pending-request metric that
// KEDA scales on. A request that is trying (stepped out) is not counted.
func (q *Queue) Depth(ctx context.Context, model string) (int64, error) {
	if err := checkName("model", model); err != nil {
		return 0, err
	}
	n, err := depthScript.Run(ctx, q.rdb, []string{q.keys.Queue(model)}, q.keys.QueueWake(model)).Int64()
	if err != nil {
		return 0, fmt.Errorf("queue depth %s: %w", model, err)
	}
	return n, nil
}
