package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/registry"
)

// refreshLoop reads the registry into the routing snapshot every
// RefreshInterval, and at once when asked, until ctx ends.
func (o *Orchestrator) refreshLoop(ctx context.Context) {
	t := time.NewTicker(RefreshInterval)
	defer t.Stop()
	for {
		o.refreshOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-o.refresh:
		}
	}
}

// refreshOnce takes a new snapshot, updates the node gauges and fails the
// forwarded requests whose node has gone or changed hands.
func (o *Orchestrator) refreshOnce(ctx context.Context) {
	nodes, err := o.cfg.Registry.List(ctx)
	if err != nil {
		if ctx.Err() == nil {
			o.cfg.Logger.Warn("routing snapshot not refreshed", "err", err)
		}
		return
	}
	now := o.cfg.Now()
	if cloud := o.cloud.Load(); cloud != nil {
		nodes = append(nodes, *cloud...)
	}
	o.snap.Store(&snapshot{nodes: nodes, at: now})
	o.cfg.Metrics.countNodes(nodes, now)

	byID := make(map[string]registry.Node, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	var lost []*reqStream
	o.mu.Lock()
	for _, s := range o.remote {
		n, ok := byID[s.nodeID]
		if !ok || n.Owner != s.owner {
			lost = append(lost, s)
		}
	}
	o.mu.Unlock()
	for _, s := range lost {
		s.fail(fmt.Errorf("%w: node %s left or moved to another replica", errLost, s.nodeID))
	}
}
