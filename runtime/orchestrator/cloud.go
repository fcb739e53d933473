package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/llmplat/llmplat/runtime/enginemetrics"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/registry"
)

// CloudNode is an engine in the cluster that the orchestrator reaches over
// HTTP, found rather than dialled in: each replica reads its load from the
// engine's /metrics every heartbeat interval, as a node agent would, and
// routes to it like any node.
type CloudNode struct {
	ID     string // the pod's name in a cluster
	URL    string // base URL without /v1
	Models []registry.ModelSlot
	// Host is the Kubernetes Node the engine runs on, when known.
	Host string
}

// validate reports an unusable cloud node.
func (n CloudNode) validate() error {
	if !nodeproto.ValidID(n.ID) || n.URL == "" || len(n.Models) == 0 {
		return fmt.Errorf("cloud node %q needs an id, a URL and a model", n.ID)
	}
	return nil
}

// CloudSource tells a replica which cloud nodes exist: a fixed list
// (StaticCloud), or the ready endpoints of the models' Services as a
// Kubernetes controller watches them.
type CloudSource interface {
	// CloudNodes returns the cloud nodes that may get work now.
	CloudNodes() []CloudNode
	// Changed delivers a value whenever CloudNodes may have changed.
	Changed() <-chan struct{}
}

// StaticCloud is a fixed list of cloud nodes.
type StaticCloud []CloudNode

// CloudNodes returns the list.
func (s StaticCloud) CloudNodes() []CloudNode { return s }

// Changed never delivers: the list does not change.
func (StaticCloud) Changed() <-chan struct{} { return nil }

// CloudDrainTTL is how long a cloud node's drain mark lasts: far longer
// than a disrupted Node takes to go, and cloud node ids (pod names) are
// not reused.
const CloudDrainTTL = 6 * time.Hour

// DrainCloud stops every replica assigning new work to the cloud nodes
// (their in-flight streams go on), and records a drain event for each with
// reason. Its mark lives in Redis, so replicas that did not decide the
// drain honour it too; it is for one actor, the controller's leader. A
// node already marked is left as it is, so a new leader going over the
// disrupted Nodes again changes nothing.
func (o *Orchestrator) DrainCloud(ctx context.Context, nodeIDs []string, reason string) error {
	marked, err := o.cfg.Registry.CloudDraining(ctx, nodeIDs)
	if err != nil {
		return err
	}
	var fresh []string
	for _, id := range nodeIDs {
		if !marked[id] {
			fresh = append(fresh, id)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	if err := o.cfg.Registry.MarkCloudDraining(ctx, fresh, reason, CloudDrainTTL); err != nil {
		return err
	}
	o.cfg.Metrics.cloudDrained(len(fresh))
	o.kickCloud()
	var errs []error
	for _, id := range fresh {
		o.cfg.Logger.Info("cloud node draining", "node_id", id, "reason", reason)
		if o.cfg.Events != nil {
			errs = append(errs, o.cfg.Events.CloudDraining(ctx, id, o.cfg.ID, reason))
		}
	}
	return errors.Join(errs...)
}

// ResumeCloud puts drained cloud nodes back in routing on every replica:
// the controller's leader does when one is its model's last ready engine
// again, its pod still running on a Node being disrupted (another engine
// that served the model went). A node not marked is left as it is.
func (o *Orchestrator) ResumeCloud(ctx context.Context, nodeIDs []string, reason string) error {
	marked, err := o.cfg.Registry.CloudDraining(ctx, nodeIDs)
	if err != nil {
		return err
	}
	var back []string
	for _, id := range nodeIDs {
		if marked[id] {
			back = append(back, id)
		}
	}
	if len(back) == 0 {
		return nil
	}
	if err := o.cfg.Registry.ClearCloudDraining(ctx, back); err != nil {
		return err
	}
	o.kickCloud()
	for _, id := range back {
		o.cfg.Logger.Info("cloud node back in routing", "node_id", id, "reason", reason)
	}
	return nil
}

// kickCloud asks cloudLoop to re-read its source now.
func (o *Orchestrator) kickCloud() {
	select {
	case o.cloudKick <- struct{}{}:
	default:
	}
}

// cloudLoop keeps the routing snapshot's cloud nodes: it re-reads the
// source whenever it changes, publishing at once so a node that left
// stops getting work before its next scrape, and reads every node's load
// now and every heartbeat interval, until ctx ends.
func (o *Orchestrator) cloudLoop(ctx context.Context) {
	src := o.cfg.Cloud
	if src == nil {
		return
	}
	t := o.cfg.Clock.NewTicker(nodeproto.HeartbeatInterval)
	defer t.Stop()
	var last map[string]registry.Node
	for {
		nodes := o.cloudNodes(ctx, src, last)
		o.publishCloud(nodes)
		o.scrapeCloud(ctx, nodes)
		// The source may have changed during the scrape: publish only the
		// nodes it still has, with their new readings.
		keep := o.cloudNodes(ctx, src, byNodeID(nodes))
		o.publishCloud(keep)
		last = byNodeID(keep)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-src.Changed():
		case <-o.cloudKick:
		}
	}
}

// cloudNodes returns the source's nodes as routing nodes, with the load
// last read for those in last and the drain marks in Redis applied. A node
// new to the source has no reading yet, so it is not healthy until its
// first scrape.
func (o *Orchestrator) cloudNodes(ctx context.Context, src CloudSource, last map[string]registry.Node) []registry.Node {
	cns := src.CloudNodes()
	nodes := make([]registry.Node, 0, len(cns))
	ids := make([]string, 0, len(cns))
	for _, cn := range cns {
		if cn.validate() != nil {
			continue
		}
		n := registry.Node{ID: cn.ID, Location: registry.LocationCloud, ServiceURL: cn.URL,
			Models: cn.Models, State: registry.StateActive}
		if prev, ok := last[cn.ID]; ok && prev.ServiceURL == cn.URL {
			n.LastSeen, n.QueueDepth, n.Running, n.KVCacheUsage = prev.LastSeen, prev.QueueDepth, prev.Running, prev.KVCacheUsage
		}
		nodes, ids = append(nodes, n), append(ids, cn.ID)
	}
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	draining, err := o.cfg.Registry.CloudDraining(rctx, ids)
	cancel()
	if err != nil {
		// Without Redis a drain mark cannot be read: keep the states last
		// read, so a draining node does not come back.
		if ctx.Err() == nil {
			o.cfg.Logger.Warn("cloud drain marks not read", "err", err)
		}
		for i := range nodes {
			if prev, ok := last[nodes[i].ID]; ok {
				nodes[i].State = prev.State
			}
		}
		return nodes
	}
	for i := range nodes {
		if draining[nodes[i].ID] {
			nodes[i].State = registry.StateDraining
		}
	}
	return nodes
}

// byNodeID indexes nodes by id.
func byNodeID(nodes []registry.Node) map[string]registry.Node {
	m := make(map[string]registry.Node, len(nodes))
	for _, n := range nodes {
		m[n.ID] = n
	}
	return m
}

// publishCloud puts a copy of nodes in the routing snapshot now.
func (o *Orchestrator) publishCloud(nodes []registry.Node) {
	o.cloud.Store(new(slices.Clone(nodes)))
	o.refreshNow()
}

// scrapeCloud reads the nodes' load in place. A node whose scrape fails
// keeps its last reading, so it leaves routing once that is older than
// registry.HealthyWithin.
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
			n.LastSeen, n.QueueDepth, n.Running = o.cfg.Clock.Now(), load.Waiting, load.Running
			if load.KVCacheUsage != nil {
				n.KVCacheUsage = *load.KVCacheUsage
			}
		}()
	}
	wg.Wait()
}
