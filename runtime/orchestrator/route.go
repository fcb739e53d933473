package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/routing"
)

var _ dispatch.Dispatcher = (*Orchestrator)(nil)

// maxAttempts is one try and one retry on another node, for a request
// whose node is lost before its first event.
const maxAttempts = 2

// retryAfterLost is the wait advised to a client whose request lost its
// node with no other node free: about a heartbeat, by when the registry
// shows the fleet as it is.
const retryAfterLost = nodeproto.HeartbeatInterval

// Dispatch implements dispatch.Dispatcher: it routes the job to a node and
// returns its stream once the first event is in hand. No node with room:
// dispatch.ErrNoCapacity, and the gateway queues the request.
func (o *Orchestrator) Dispatch(ctx context.Context, job *dispatch.Job) (dispatch.Stream, error) {
	need := routing.Footprint(job.PromptEstimate + job.MaxOutput)
	o.await(job.Model, 1)
	defer o.await(job.Model, -1)
	var tried []string
	var lastErr error
	for attempt := range maxAttempts {
		n, slot, release, ok, enginesDown := o.choose(job.Model, need, tried)
		if !ok && enginesDown && lastErr == nil {
			o.cfg.Metrics.routed(o.cfg.Policy.Name(), job.Model, "no_healthy_node")
			return nil, fmt.Errorf("%w: %s", dispatch.ErrNoHealthyNode, job.Model)
		}
		if !ok {
			o.cfg.Metrics.routed(o.cfg.Policy.Name(), job.Model, "no_capacity")
			if lastErr != nil {
				// The one retry the request gets has no node: it ends here
				// rather than as ErrNoCapacity, which would queue it at the
				// gateway and run it again (a second retry).
				o.cfg.Logger.Info("no node for the retry of a lost request", "request_id", job.RequestID, "err", lastErr)
				return nil, &dispatch.Error{Status: http.StatusServiceUnavailable, RetryAfter: retryAfterLost,
					Body: openai.NewEngineError(http.StatusServiceUnavailable, "", "the node chosen for this request was lost before it started, and no other node has room; retry")}
			}
			return nil, fmt.Errorf("%w: %s", dispatch.ErrNoCapacity, job.Model)
		}
		if attempt > 0 {
			o.cfg.Metrics.retries.WithLabelValues(job.Model).Inc()
		}
		st, err := o.start(ctx, n, slot, job, release)
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, errLost) || ctx.Err() != nil {
			return nil, err
		}
		o.cfg.Logger.Info("node lost before the first event", "request_id", job.RequestID, "node_id", n.ID, "err", err)
		tried = append(tried, n.ID)
		lastErr = err
	}
	return nil, &dispatch.Error{Status: http.StatusBadGateway,
		Body: openai.NewEngineError(http.StatusBadGateway, "", "the nodes chosen for this request were lost before it started; retry")}
}

// await counts requests waiting for their first event, for the pending
// gauge.
func (o *Orchestrator) await(model string, d int) {
	o.mu.Lock()
	o.awaiting[model] += d
	if o.awaiting[model] <= 0 {
		delete(o.awaiting, model)
	}
	o.mu.Unlock()
}

// choose picks a node (pick) and counts the request's need on it in the
// tracker, as one step: release gives the count back.
func (o *Orchestrator) choose(model string, need int64, skip []string) (n registry.Node, slot registry.ModelSlot, release func(), ok, enginesDown bool) {
	o.routeMu.Lock()
	defer o.routeMu.Unlock()
	n, slot, ok, enginesDown = o.pick(model, need, skip)
	if ok {
		release = o.tracker.Assign(n.ID, need, o.cfg.Clock.Now())
	}
	return n, slot, release, ok, enginesDown
}

// pick chooses a node for the model with the routing policy among the
// snapshot's healthy nodes, leaving out those in skip. enginesDown reports
// that no node could be chosen because every active node of the model
// reports its engine down.
func (o *Orchestrator) pick(model string, need int64, skip []string) (n registry.Node, slot registry.ModelSlot, ok, enginesDown bool) {
	snap := o.snap.Load()
	now := o.cfg.Clock.Now()
	var (
		nodes []registry.Node
		slots []registry.ModelSlot
		cands []routing.Candidate
		down  int // active nodes of the model whose engine is down
	)
	for _, n := range snap.nodes {
		slot, serves := n.Serves(model)
		if !serves || slices.Contains(skip, n.ID) {
			continue
		}
		if n.EngineDown != "" && n.State == registry.StateActive {
			down++
		}
		if !n.Healthy(now) {
			continue
		}
		local := n.Owner == o.cfg.ID
		if local && !o.localAccepting(n.ID, n.Epoch) {
			continue // gone or leaving here, before the snapshot knows
		}
		c := routing.Candidate{NodeID: n.ID, Local: local, MaxNumSeqs: slot.MaxNumSeqs,
			KVCapacityTokens: slot.KVCapacityTokens, KVCacheUsage: n.KVCacheUsage,
			QueueDepth: n.QueueDepth, Running: n.Running}
		o.tracker.Fill(&c, n.LastSeen)
		nodes, slots, cands = append(nodes, n), append(slots, slot), append(cands, c)
	}
	i := o.cfg.Policy.Pick(cands, need)
	if i < 0 || i >= len(nodes) {
		return registry.Node{}, registry.ModelSlot{}, false, len(cands) == 0 && down > 0
	}
	return nodes[i], slots[i], true, false
}

// localAccepting reports whether this replica holds a socket of the node
// at epoch or newer that takes new work.
func (o *Orchestrator) localAccepting(nodeID string, epoch int64) bool {
	o.mu.Lock()
	c := o.conns[nodeID]
	o.mu.Unlock()
	if c == nil || c.epoch < epoch {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepting()
}

// start sends the job to node n and waits for its first event.
func (o *Orchestrator) start(ctx context.Context, n registry.Node, slot registry.ModelSlot, job *dispatch.Job, release func()) (dispatch.Stream, error) {
	body := job.EngineBody(slot.ServedName)
	if n.Location == registry.LocationCloud && n.ServiceURL != "" {
		o.cfg.Metrics.routed(o.cfg.Policy.Name(), job.Model, "cloud")
		st, err := engineclient.OpenEngineStream(ctx, o.cfg.CloudClient, n.ServiceURL, job.RequestID, body)
		if err != nil {
			release()
			if de := (*dispatch.Error)(nil); errors.As(err, &de) {
				// The client gets only the status; the engine's words are
				// for this log.
				o.cfg.Logger.Warn("cloud engine refused a request", "request_id", job.RequestID, "node_id", n.ID,
					"status", de.Status, "upstream", de.Upstream)
			}
			if errors.Is(err, dispatch.ErrNoCapacity) {
				return nil, fmt.Errorf("%w: %w", errLost, err)
			}
			return nil, err
		}
		return &releasingStream{Stream: st, release: release}, nil
	}
	a := &nodeproto.Assign{RequestID: job.RequestID, Model: job.Model, Body: body}
	var (
		s   *reqStream
		err error
	)
	if n.Owner == o.cfg.ID {
		o.cfg.Metrics.routed(o.cfg.Policy.Name(), job.Model, "local")
		s, err = o.startLocal(n, a, release)
	} else {
		o.cfg.Metrics.routed(o.cfg.Policy.Name(), job.Model, "remote")
		s, err = o.startRemote(ctx, n, a, release)
	}
	if err != nil {
		return nil, err
	}
	s.watch(ctx)
	if err := s.first(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// startLocal assigns the request on this replica's socket of the node.
func (o *Orchestrator) startLocal(n registry.Node, a *nodeproto.Assign, release func()) (*reqStream, error) {
	o.mu.Lock()
	c := o.conns[n.ID]
	o.mu.Unlock()
	if c == nil {
		release()
		return nil, fmt.Errorf("%w: node %s has no socket here", errLost, n.ID)
	}
	id := a.RequestID // the closure must not hold a, whose body is the prompt
	s := newReqStream(id, n.ID, c.epoch, o.cfg.Window, c, func() {
		c.forget(id)
		release()
	})
	if err := c.assign(a, s); err != nil {
		release()
		return nil, err
	}
	return s, nil
}

// startRemote forwards the request to the replica that owns the node's
// socket, on the node's channel; the replies come on this replica's.
func (o *Orchestrator) startRemote(ctx context.Context, n registry.Node, a *nodeproto.Assign, release func()) (*reqStream, error) {
	select {
	case <-o.ready:
	case <-ctx.Done():
		release()
		return nil, context.Cause(ctx)
	}
	attempt := o.attempts.Add(1)
	l := remoteLink{o: o, nodeID: n.ID, epoch: n.Epoch, attempt: attempt}
	id := a.RequestID // the closure must not hold a, whose body is the prompt
	var (
		s   *reqStream
		err error
	)
	s = newReqStream(id, n.ID, n.Epoch, o.cfg.Window, l, func() {
		o.mu.Lock()
		if o.remote[id] == s {
			delete(o.remote, id)
		}
		o.mu.Unlock()
		release()
	})
	s.owner, s.attempt = n.Owner, attempt
	o.mu.Lock()
	o.remote[a.RequestID] = s
	o.mu.Unlock()
	got, err := o.publish(ctx, o.keys.NodeChannel(n.ID), header{Node: n.ID, From: o.cfg.ID, Epoch: n.Epoch, Attempt: attempt}, a)
	if err == nil && got == 0 {
		err = fmt.Errorf("no replica holds the socket of node %s", n.ID)
	}
	if err != nil {
		s.settled = true // nothing runs: no cancel to send
		s.Close()
		return nil, fmt.Errorf("%w: %w", errLost, err)
	}
	return s, nil
}

// releasingStream gives a cloud node's tracker place back on Close.
type releasingStream struct {
	dispatch.Stream
	release func()
	done    bool
}

func (s *releasingStream) Close() error {
	err := s.Stream.Close()
	if !s.done {
		s.done = true
		s.release()
	}
	return err
}
