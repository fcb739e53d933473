package quota

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// waker delivers one waiting request's wake-ups from its model's pub/sub
// channel. Its goroutine ends in close.
type waker struct {
	ps   *redis.PubSub
	wake chan struct{} // size 1: wake-ups coalesce and the listener never blocks
	stop chan struct{}
	done chan struct{}
}

// listen subscribes to model's wake channel and returns once the
// subscription is active, so no wake-up sent after the request is queued
// can be missed.
func (q *Queue) listen(ctx context.Context, model, requestID string) (*waker, error) {
	ps := q.rdb.Subscribe(ctx, q.keys.QueueWake(model))
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("subscribe to %s wake-ups: %w", model, err)
	}
	w := &waker{
		ps:   ps,
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go w.run(requestID)
	return w, nil
}

// run forwards the wake-ups addressed to requestID until close.
func (w *waker) run(requestID string) {
	defer close(w.done)
	for {
		// Close unblocks this read; go-redis resubscribes after a
		// connection failure on the next call.
		msg, err := w.ps.Receive(context.Background())
		if err != nil {
			if !w.pause() {
				return
			}
			continue
		}
		if m, ok := msg.(*redis.Message); ok && m.Payload == requestID {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
}

// pause waits listenRetryDelay after a failed read and reports false when
// the waker is closing instead.
func (w *waker) pause() bool {
	t := time.NewTimer(listenRetryDelay)
	defer t.Stop()
	select {
	case <-w.stop:
		return false
	case <-t.C:
		return true
	}
}

// close ends the subscription and waits for the listener to return.
func (w *waker) close() {
	close(w.stop)
	_ = w.ps.Close()
	<-w.done
}
