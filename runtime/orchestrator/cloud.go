package orchestrator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/llmplat/llmplat/runtime/enginemetrics"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/registry"
)

// CloudNode is an engine in the cluster that the orchestrator reaches over
// HTTP at its Service URL, configured rather than dialled in: each replica
// reads its load from the engine's /metrics every heartbeat interval, as a
// node agent would, and routes to it like any node.
type CloudNode struct {
	ID     string
	URL    string // base URL without /v1
	Models []registry.ModelSlot
}

// validate reports an unusable cloud node.
func (n CloudNode) validate() error {
	if !nodeproto.ValidID(n.ID) || n.URL == "" || len(n.Models) == 0 {
		return fmt.Errorf("cloud node %q needs an id, a URL and a model", n.ID)
	}
	return nil
}

// cloudLoop reads every cloud node's load now and every heartbeat
// interval until ctx ends.
func (o *Orchestrator) cloudLoop(ctx context.Context) {
	if len(o.cfg.CloudNodes) == 0 {
		return
	}
	nodes := make([]registry.Node, len(o.cfg.CloudNodes))
	for i, cn := range o.cfg.CloudNodes {
		nodes[i] = registry.Node{ID: cn.ID, Location: registry.LocationCloud, ServiceURL: cn.URL,
			Models: cn.Models, State: registry.StateActive}
	}
	t := time.NewTicker(nodeproto.HeartbeatInterval)
	defer t.Stop()
	for {
		o.scrapeCloud(ctx, nodes)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scrapeCloud reads the nodes' load at once and publishes a copy to the
// routing snapshot. A node whose scrape fails keeps its last reading, so it
// leaves routing once that is older than registry.HealthyWithin.
func (o *Orchestrator) scrapeCloud(ctx context.Context, nodes []registry.Node) {
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := &nodes[i]
			load, err := enginemetrics.Scrape(ctx, o.cfg.CloudClient, n.ServiceURL)
			if err != nil {
				if ctx.Err() == nil {
					o.cfg.Logger.Warn("cloud node load not read", "node_id", n.ID, "err", err)
				}
				return
			}
			n.LastSeen, n.QueueDepth, n.Running = o.cfg.Now(), load.Waiting, load.Running
			if load.KVCacheUsage != nil {
				n.KVCacheUsage = *load.KVCacheUsage
			}
		}()
	}
	wg.Wait()
	o.cloud.Store(new(append([]registry.Node(nil), nodes...)))
	o.refreshNow()
}
