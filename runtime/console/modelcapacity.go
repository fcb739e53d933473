package console

import (
	"slices"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// modelCapacity is one model's serving capacity as the platform models
// page shows it: its registered nodes by what their heartbeats say, what
// waits for it, and how full the serving replicas are.
type modelCapacity struct {
	Model string
	// Serving are the nodes with a live heartbeat, healthy and not
	// draining: the replicas new requests are routed to.
	Serving int
	// Draining are live nodes finishing their streams, taking no new ones;
	// Unhealthy are live nodes whose engine is down or failing its checks
	// (a draining node counts as draining only); Silent are registered
	// nodes with no live heartbeat (drained, disconnected, or not beating
	// yet). None of them is capacity.
	Draining, Unhealthy, Silent int
	// Pending is the requests waiting for the model (Config.Pending), as
	// the models table shows; ShowPending says it is known.
	Pending     int64
	ShowPending bool
	// QueueDepth and Running sum the engine queues and running streams
	// the model's live nodes report. A node serving several models reports
	// one queue, counted under each of them.
	QueueDepth, Running int
	// KVMean and KVMax are the serving nodes' KV-cache use (0 to 1); both
	// are zero when no node serves.
	KVMean, KVMax float64
}

// capacityOf reads each model's capacity off the registered nodes and
// their live heartbeats (keyed by node id), in the order of models, with
// each model's pending requests when showPending says they are known.
func capacityOf(models []platformModel, nodes []adminwire.Node, live map[string]adminwire.NodeLive, showPending bool) []modelCapacity {
	out := make([]modelCapacity, 0, len(models))
	for _, m := range models {
		mc := modelCapacity{Model: m.Name, Pending: m.Pending, ShowPending: showPending}
		kvSum := 0.0
		for _, n := range nodes {
			if !slices.Contains(modelNames(n), m.Name) {
				continue
			}
			l, ok := live[n.ID]
			switch {
			case !ok:
				mc.Silent++
				continue
			case l.Draining:
				mc.Draining++
			case !l.Healthy:
				mc.Unhealthy++
			default:
				mc.Serving++
				kvSum += l.KVCacheUsage
				mc.KVMax = max(mc.KVMax, l.KVCacheUsage)
			}
			mc.QueueDepth += l.QueueDepth
			mc.Running += l.Running
		}
		if mc.Serving > 0 {
			mc.KVMean = kvSum / float64(mc.Serving)
		}
		out = append(out, mc)
	}
	return out
}
