package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/backoff"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// header starts every pub/sub message between replicas; the frame, if
// any, follows after a newline, exactly as it travels on the socket.
type header struct {
	// Node is the node a message on a node channel is for.
	Node string `json:"node,omitempty"`
	// From is the replica that forwarded the request: replies go to its
	// channel.
	From string `json:"from,omitempty"`
	// Epoch is the node connection the sender routed to; a replica whose
	// socket is older ignores an assign meant for a newer one.
	Epoch int64 `json:"epoch,omitempty"`
	// ID is the request a reply belongs to.
	ID string `json:"id,omitempty"`
	// Attempt tells one try of a request from another: the requester
	// draws it for each assign, the owner's replies carry it back, and a
	// reply of an earlier try never reaches a retry's stream.
	Attempt uint64 `json:"attempt,omitempty"`
	// Lost says the owner cannot run, or lost, the request.
	Lost string `json:"lost,omitempty"`
	// Op is a control message without a frame: opRevoke.
	Op string `json:"op,omitempty"`
}

// opRevoke asks the owner to close a node's socket: its token was revoked.
const opRevoke = "revoke"

// receiveBackoff spaces the reads after a failed pub/sub read: 100 ms
// doubling to 1 s, so a Redis outage logs about once a second rather than
// ten times, and a subscription back from one misses at most a second more.
var receiveBackoff = backoff.Schedule{Base: 100 * time.Millisecond, Cap: time.Second}

// envelope encodes a pub/sub message.
func envelope(h header, frame []byte) ([]byte, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	b = append(b, '\n')
	return append(b, frame...), nil
}

// openEnvelope splits a pub/sub message into its header and frame.
func openEnvelope(payload string) (header, []byte, error) {
	var h header
	head, frame, _ := bytes.Cut([]byte(payload), []byte{'\n'})
	if err := json.Unmarshal(head, &h); err != nil {
		return h, nil, fmt.Errorf("decode header: %w", err)
	}
	return h, frame, nil
}

// publish sends one message, bounded by publishTimeout, and returns how
// many subscribers got it.
func (o *Orchestrator) publish(ctx context.Context, channel string, h header, f nodeproto.Frame) (int64, error) {
	return publish(ctx, o.cfg.Redis, channel, h, f)
}

// publish sends one message on rdb, bounded by publishTimeout, and returns
// how many subscribers got it.
func publish(ctx context.Context, rdb redis.UniversalClient, channel string, h header, f nodeproto.Frame) (int64, error) {
	var frame []byte
	if f != nil {
		var err error
		if frame, err = nodeproto.Encode(f); err != nil {
			return 0, err
		}
	}
	payload, err := envelope(h, frame)
	if err != nil {
		return 0, err
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	n, err := rdb.Publish(pctx, channel, payload).Result()
	if err != nil {
		return 0, fmt.Errorf("publish: %w", err)
	}
	return n, nil
}

// receive hands every message of ps to handle until ps is closed.
// A failed read (the connection dropped) is followed by onGap, when set:
// messages published until the subscription is back are lost.
func (o *Orchestrator) receive(ctx context.Context, ps *redis.PubSub, handle func(context.Context, *redis.Message), onGap func(error)) {
	ctx = context.WithoutCancel(ctx) // runs until Run closes ps, after the sockets
	bo := backoff.New(receiveBackoff, nil)
	for {
		msg, err := ps.ReceiveMessage(ctx)
		if errors.Is(err, redis.ErrClosed) || (err != nil && o.unsubscribed.Load()) {
			return // closed, or its read cut short by the close
		}
		if err != nil {
			o.cfg.Logger.Warn("pub/sub receive failed", "err", err)
			if onGap != nil {
				onGap(err)
			}
			time.Sleep(bo.Next())
			continue
		}
		bo.Reset()
		handle(ctx, msg)
	}
}

// repliesLost fails every forwarded request: the reply subscription
// dropped, so frames of each may be lost, and an owner whose publish
// reached nobody has cancelled its run without anyone to tell. Each
// stream breaks now (and cancels, in case its run goes on) instead of
// waiting for frames that will not come.
func (o *Orchestrator) repliesLost(err error) {
	o.failRemote(fmt.Errorf("reply subscription dropped: %w", err))
}

// onNodeMessage acts on a message for a node whose socket is here.
func (o *Orchestrator) onNodeMessage(ctx context.Context, msg *redis.Message) {
	h, frame, err := openEnvelope(msg.Payload)
	if err != nil {
		o.cfg.Logger.Warn("bad node channel message", "err", err)
		return
	}
	o.mu.Lock()
	c := o.conns[h.Node]
	o.mu.Unlock()
	if h.Op == opRevoke {
		if c != nil {
			c.revoke()
		}
		return
	}
	f, err := nodeproto.Decode(frame)
	if err != nil {
		o.cfg.Logger.Warn("bad frame on node channel", "node_id", h.Node, "err", err)
		return
	}
	switch f := f.(type) {
	case *nodeproto.Assign:
		o.relayAssign(ctx, c, h, f)
	case *nodeproto.Window:
		// The request runs on the socket it was assigned to, which may be
		// an older one than the node's current socket here (superseded,
		// finishing its requests).
		if rc := o.relayConn(f.RequestID, c); rc != nil {
			if s, ok := rc.take(f.RequestID, false).(*relaySink); ok && s.attempt == h.Attempt {
				rc.grant(f.RequestID, f.Chunks)
			}
		}
	case *nodeproto.Cancel:
		if rc := o.relayConn(f.RequestID, c); rc != nil {
			o.cancelRelayed(rc, f.RequestID, h.Attempt, f.Reason)
		}
	case *nodeproto.Drain:
		if c != nil {
			c.drain(f.Deadline())
			o.markDraining(ctx, c)
		}
	}
}

// cancelRelayed stops a forwarded request's relay and cancels it on the
// node, if the socket here runs that attempt of it.
func (o *Orchestrator) cancelRelayed(c *nodeConn, requestID string, attempt uint64, reason string) {
	if s, ok := c.take(requestID, false).(*relaySink); !ok || s.attempt != attempt {
		return
	}
	if s, ok := c.take(requestID, true).(*relaySink); ok {
		s.stop()
		c.send(&nodeproto.Cancel{RequestID: requestID, Reason: reason})
	}
}

// relayAssign runs a forwarded request on the node's socket here and
// relays its frames back, or answers that it cannot.
func (o *Orchestrator) relayAssign(ctx context.Context, c *nodeConn, h header, a *nodeproto.Assign) {
	if c != nil && c.epoch < h.Epoch {
		return // a newer connection of the node, at another replica, takes it
	}
	lost := func(why string) {
		if o.superseded(ctx, h.Node, c) {
			// The requester routed from a stale snapshot: a newer socket of
			// the node, at another replica, got the assign too and answers
			// it. A lost reply from here would make the requester retry
			// while that run goes on.
			return
		}
		if _, err := o.publish(ctx, o.keys.ReplicaChannel(h.From), header{ID: a.RequestID, Attempt: h.Attempt, Lost: why}, nil); err != nil {
			o.cfg.Logger.Warn("lost reply not sent", "request_id", a.RequestID, "err", err)
		}
	}
	if c == nil {
		lost("the node's socket is not here")
		return
	}
	r := newRelay(h.From, a.RequestID, h.Node, h.Attempt, o.cfg.Window)
	r.abort = func(reason string) { o.cancelRelayed(c, a.RequestID, h.Attempt, reason) }
	if err := c.assign(a, r); err != nil {
		lost(err.Error())
		return
	}
	id := a.RequestID
	o.mu.Lock()
	o.relayed[id] = c
	o.mu.Unlock()
	o.relayWG.Add(1)
	go func() {
		defer o.relayWG.Done()
		r.run(ctx, o)
		o.mu.Lock()
		if o.relayed[id] == c {
			delete(o.relayed, id)
		}
		o.mu.Unlock()
	}()
}

// superseded reports whether the registry holds a newer registration of
// the node than the socket here (c, or none): then that socket's replica
// answers the node's assigns.
func (o *Orchestrator) superseded(ctx context.Context, nodeID string, c *nodeConn) bool {
	var here int64
	if c != nil {
		here = c.epoch
	}
	gctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	n, err := o.cfg.Registry.Get(gctx, nodeID)
	return err == nil && n.Epoch > here && n.Owner != o.cfg.ID
}

// onReply hands a reply to the forwarded request it belongs to. A reply
// for a request or attempt no stream here waits for (the consumer left,
// or an earlier try) is answered with a cancel, so the owner stops the
// run instead of relaying it to nobody.
func (o *Orchestrator) onReply(ctx context.Context, msg *redis.Message) {
	h, frame, err := openEnvelope(msg.Payload)
	if err != nil {
		o.cfg.Logger.Warn("bad reply message", "err", err)
		return
	}
	o.mu.Lock()
	s := o.remote[h.ID]
	o.mu.Unlock()
	if s == nil || s.attempt != h.Attempt {
		if h.Lost == "" && h.Node != "" && o.firstOrphanReply(h.ID, h.Attempt) {
			remoteLink{o: o, nodeID: h.Node, attempt: h.Attempt}.abort(h.ID, "requester_gone")
		}
		return
	}
	if h.Lost != "" {
		// The owner reported the loss: nothing runs there to cancel.
		s.fail(fmt.Errorf("%w: %w: %s", errLost, errGone, h.Lost))
		return
	}
	f, err := nodeproto.Decode(frame)
	if err != nil {
		s.fail(fmt.Errorf("%w: bad reply frame: %v", errLost, err))
		return
	}
	if !s.push(f) {
		s.fail(errCredit)
	}
}

// relaySink publishes a forwarded request's frames, in order, to the
// replica that forwarded it: one goroutine per request, each publish
// awaited, so frames never overtake one another.
type relaySink struct {
	to, id  string
	node    string // the node, named in each reply so a requester can cancel
	attempt uint64
	// abort cancels the request on the node: its replies reach nobody.
	abort    func(reason string)
	ch       chan nodeproto.Frame // window + 2, as reqStream's
	failOnce sync.Once
	failed   chan struct{}
	failErr  error
	stopOnce sync.Once
	stopped  chan struct{}
}

func newRelay(to, id, node string, attempt uint64, window int) *relaySink {
	return &relaySink{to: to, id: id, node: node, attempt: attempt, ch: make(chan nodeproto.Frame, window+2),
		failed: make(chan struct{}), stopped: make(chan struct{})}
}

func (r *relaySink) push(f nodeproto.Frame) bool {
	select {
	case r.ch <- f:
		return true
	default:
		return false
	}
}

func (r *relaySink) fail(err error) {
	r.failOnce.Do(func() {
		r.failErr = err
		close(r.failed)
	})
}

// stop ends the relay without a reply: the requester cancelled.
func (r *relaySink) stop() { r.stopOnce.Do(func() { close(r.stopped) }) }

// run publishes until the request's done or error, a failure, or stop.
func (r *relaySink) run(ctx context.Context, o *Orchestrator) {
	channel := o.keys.ReplicaChannel(r.to)
	reply := header{ID: r.id, Node: r.node, Attempt: r.attempt}
	send := func(h header, f nodeproto.Frame) bool {
		got, err := o.publish(ctx, channel, h, f)
		if err != nil {
			o.cfg.Logger.Warn("relay publish failed", "request_id", r.id, "err", err)
		}
		if err != nil || got == 0 {
			// Nobody heard it (the requester's replica is gone, or the
			// frame is lost to it): the request runs for nobody.
			if r.abort != nil && h.Lost == "" {
				r.abort("requester_gone")
			}
			return false
		}
		return true
	}
	for {
		select {
		case f := <-r.ch:
			if !send(reply, f) {
				return
			}
			switch f.(type) {
			case *nodeproto.Done, *nodeproto.Error:
				return
			}
		case <-r.failed:
			for {
				select {
				case f := <-r.ch:
					if !send(reply, f) {
						return
					}
				default:
					lost := reply
					lost.Lost = r.failErr.Error()
					send(lost, nil)
					return
				}
			}
		case <-r.stopped:
			return
		}
	}
}

// remoteLink sends a forwarded request's window and cancel frames to the
// replica that owns its node's socket.
type remoteLink struct {
	o       *Orchestrator
	nodeID  string
	epoch   int64
	attempt uint64
}

func (l remoteLink) grant(requestID string, chunks int) {
	l.send(&nodeproto.Window{RequestID: requestID, Chunks: chunks})
}

func (l remoteLink) abort(requestID, reason string) {
	l.send(&nodeproto.Cancel{RequestID: requestID, Reason: reason})
}

func (l remoteLink) send(f nodeproto.Frame) {
	h := header{Node: l.nodeID, From: l.o.cfg.ID, Epoch: l.epoch, Attempt: l.attempt}
	if _, err := l.o.publish(context.Background(), l.o.keys.NodeChannel(l.nodeID), h, f); err != nil {
		l.o.cfg.Logger.Warn("forwarded frame not sent", "node_id", l.nodeID, "type", f.Type(), "err", err)
	}
}

// orphanMemory is how long a cancelled orphan is remembered, so the frames
// already on their way from its owner do not each send another cancel;
// orphansRemembered bounds how many are, the least recently seen going
// first (a forgotten one costs one more cancel, never a lost frame).
const (
	orphanMemory      = time.Minute
	orphansRemembered = 1024
)

// firstOrphanReply reports whether this is the first reply of an attempt
// no stream here waits for, within orphanMemory.
func (o *Orchestrator) firstOrphanReply(id string, attempt uint64) bool {
	key := id + "/" + strconv.FormatUint(attempt, 10)
	if _, seen := o.orphans.Get(key); seen {
		return false
	}
	o.orphans.Add(key, struct{}{}, orphanMemory)
	return true
}

// relayConn returns the socket here that runs the forwarded request id,
// or current when none is known.
func (o *Orchestrator) relayConn(id string, current *nodeConn) *nodeConn {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c := o.relayed[id]; c != nil {
		return c
	}
	return current
}
