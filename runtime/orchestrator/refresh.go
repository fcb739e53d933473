package orchestrator

import (
	"context"
	"fmt"

	"github.com/llmplat/llmplat/runtime/registry"
)

// refreshLoop reads the registry into the routing snapshot every
// RefreshInterval, and at once when asked, until ctx ends.
func (o *Orchestrator) refreshLoop(ctx context.Context) {
	t := o.cfg.Clock.NewTicker(RefreshInterval)
	defer t.Stop()
	for {
		o.refreshOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-o.refresh:
		}
	}
}

// refreshOnce takes a new snapshot, updates the node gauges and fails the
// forwarded requests whose running replica has gone.
func (o *Orchestrator) refreshOnce(ctx context.Context) {
	nodes, err := o.cfg.Registry.List(ctx)
	if err != nil {
		if ctx.Err() == nil {
			o.cfg.Logger.Warn("routing snapshot not refreshed", "err", err)
		}
		return
	}
	nodes = socketNodes(nodes)
	now := o.cfg.Clock.Now()
	if cloud := o.cloud.Load(); cloud != nil {
		nodes = append(nodes, *cloud...)
	}
	o.snap.Store(&snapshot{nodes: nodes, at: now})
	o.cfg.Metrics.countNodes(nodes, now)
	o.publishWakes(ctx, now)

	byID := make(map[string]registry.Node, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	var moved []*reqStream
	o.mu.Lock()
	for _, s := range o.remote {
		n, ok := byID[s.nodeID]
		if !ok || n.Owner != s.owner {
			moved = append(moved, s)
		}
	}
	o.mu.Unlock()
	// A forwarded request goes on while the replica running it lives, even
	// once its node re-registered elsewhere: in a rolling restart the old
	// socket carries its requests to their end, and its replica reports a
	// loss itself. It fails here only when that replica is gone.
	alive := map[string]bool{}
	for _, s := range moved {
		a, ok := alive[s.owner]
		if !ok {
			a = o.replicaAlive(ctx, s.owner)
			alive[s.owner] = a
		}
		if !a {
			s.fail(fmt.Errorf("%w: %w: replica %s, which ran it on node %s, is gone", errLost, errGone, s.owner, s.nodeID))
		}
	}
}

// replicaAlive reports whether a replica still listens on its reply
// channel: each replica subscribes to it for its whole life, so no
// subscriber means the replica is gone. An unanswered check counts as
// alive: without Redis no reply arrives anyway, and the request's own
// timeouts end it.
func (o *Orchestrator) replicaAlive(ctx context.Context, replicaID string) bool {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	ch := o.keys.ReplicaChannel(replicaID)
	subs, err := o.cfg.Redis.PubSubNumSub(ctx, ch).Result()
	return err != nil || subs[ch] > 0
}

// socketNodes keeps the registry's nodes that take requests over their
// socket. A record of another kind, a cloud node with a service URL, can
// only have been written from a node's own registration by an older
// replica: a node must never choose where the orchestrator posts prompts,
// so such a record is not routed to. Cloud nodes come from Config.Cloud.
func socketNodes(nodes []registry.Node) []registry.Node {
	kept := nodes[:0]
	for _, n := range nodes {
		if n.Location == registry.LocationOnPrem && n.ServiceURL == "" {
			kept = append(kept, n)
		}
	}
	return kept
}
