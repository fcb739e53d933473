package quota

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The wake-ups of a Queue's waiters arrive on one shared pub/sub
// connection, not one per waiter: a gateway with 2,000 queued requests
// holds one subscriber. The subscriber exists while anyone waits; it is
// subscribed to the wake channel of each model that has a waiter, and
// hands each message to the waiter it names.

// wakeHub is a Queue's shared subscriber.
type wakeHub struct {
	ps       *redis.PubSub
	channels map[string]*wakeChannel
	stop     chan struct{} // closed when the hub closes
	done     chan struct{} // closed when the receive loop has returned
	closing  bool
}

// wakeChannel is one model's wake channel within the hub.
type wakeChannel struct {
	waiters map[string]chan struct{} // by request id
	ready   chan struct{}            // closed once the subscription is active
}

// waker is one waiting request's registration.
type waker struct {
	q                  *Queue
	hub                *wakeHub
	channel, requestID string
	wake               chan struct{} // size 1: wake-ups coalesce and the hub never blocks
}

// listen registers requestID for model's wake-ups and returns once the
// hub's subscription to the channel is active, so no wake-up sent after
// the request is queued can be missed.
func (q *Queue) listen(ctx context.Context, model, requestID string) (*waker, error) {
	channel := q.keys.QueueWake(model)
	w := &waker{q: q, channel: channel, requestID: requestID, wake: make(chan struct{}, 1)}
	q.hubMu.Lock()
	h := q.hub
	if h == nil || h.closing {
		h = &wakeHub{ps: q.rdb.Subscribe(ctx), channels: map[string]*wakeChannel{}, stop: make(chan struct{}), done: make(chan struct{})}
		q.hub = h
		go q.receive(h)
	}
	w.hub = h
	ch := h.channels[channel]
	if ch == nil {
		ch = &wakeChannel{waiters: map[string]chan struct{}{}, ready: make(chan struct{})}
		h.channels[channel] = ch
		if err := h.ps.Subscribe(ctx, channel); err != nil {
			delete(h.channels, channel)
			q.hubMu.Unlock()
			w.close()
			return nil, fmt.Errorf("subscribe to %s wake-ups: %w", model, err)
		}
	}
	ch.waiters[requestID] = w.wake
	ready := ch.ready
	q.hubMu.Unlock()
	select {
	case <-ready:
		return w, nil
	case <-ctx.Done():
		w.close()
		return nil, fmt.Errorf("subscribe to %s wake-ups: %w", model, ctx.Err())
	}
}

// receive is the hub's loop: it marks subscriptions active and hands each
// message to the waiter it names, until the hub closes.
func (q *Queue) receive(h *wakeHub) {
	defer close(h.done)
	for {
		// Close unblocks this read; go-redis resubscribes after a
		// connection failure on the next call.
		msg, err := h.ps.Receive(context.Background())
		if err != nil {
			if !q.pause(h) {
				return
			}
			continue
		}
		q.hubMu.Lock()
		switch m := msg.(type) {
		case *redis.Subscription:
			if ch := h.channels[m.Channel]; m.Kind == "subscribe" && ch != nil {
				select {
				case <-ch.ready:
				default:
					close(ch.ready)
				}
			}
		case *redis.Message:
			if ch := h.channels[m.Channel]; ch != nil {
				if wake := ch.waiters[m.Payload]; wake != nil {
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			}
		}
		q.hubMu.Unlock()
	}
}

// pause waits listenRetryDelay after a failed read and reports false when
// the hub is closing instead.
func (q *Queue) pause(h *wakeHub) bool {
	t := q.clock.NewTimer(listenRetryDelay)
	defer t.Stop()
	select {
	case <-h.stop:
		return false
	case <-t.C():
		return true
	}
}

// close ends the registration. The last waiter of a channel unsubscribes
// it; the last waiter of the hub closes the hub and waits for its loop to
// return, so no goroutine outlives the wait.
func (w *waker) close() {
	q, h := w.q, w.hub
	q.hubMu.Lock()
	if ch := h.channels[w.channel]; ch != nil {
		delete(ch.waiters, w.requestID)
		if len(ch.waiters) == 0 {
			delete(h.channels, w.channel)
			if len(h.channels) > 0 {
				// Best effort: a wake-up for nobody is dropped anyway.
				_ = h.ps.Unsubscribe(context.Background(), w.channel)
			}
		}
	}
	last := len(h.channels) == 0 && !h.closing
	if last {
		h.closing = true
		close(h.stop)
		if q.hub == h {
			q.hub = nil
		}
	}
	q.hubMu.Unlock()
	if last {
		_ = h.ps.Close()
		<-h.done
	}
}
