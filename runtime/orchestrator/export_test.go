package orchestrator

import "github.com/llmplat/llmplat/runtime/registry"

// SnapshotNode returns node id as the replica's routing snapshot holds it.
// Tests wait on it before they dispatch, instead of assuming a refresh has
// happened after some sleep.
func (o *Orchestrator) SnapshotNode(id string) (registry.Node, bool) {
	snap := o.snap.Load()
	if snap == nil {
		return registry.Node{}, false
	}
	for _, n := range snap.nodes {
		if n.ID == id {
			return n, true
		}
	}
	return registry.Node{}, false
}

// NodeDied reports node id's record as expired under epoch, as the
// registry watch does.
func (o *Orchestrator) NodeDied(id string, epoch int64) { o.nodeDied(id, epoch) }

// RefreshNow asks for a new routing snapshot, for tests whose fake clock
// does not tick the refresh.
func (o *Orchestrator) RefreshNow() { o.refreshNow() }
