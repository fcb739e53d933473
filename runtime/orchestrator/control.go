package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/registry"
)

// Control drains nodes, closes the sockets of revoked nodes and reports
// live node state to the admin API. It needs only Redis and the database,
// so any process can serve those endpoints, whichever replica owns the
// socket.
type Control struct {
	reg    *registry.Registry
	rdb    redis.UniversalClient
	events *Events
	keys   registry.Keys
	clock  clock.PassiveClock
}

var (
	_ admin.Drainer          = (*Control)(nil)
	_ admin.NodeView         = (*Control)(nil)
	_ admin.NodeTokenRevoker = (*Control)(nil)
)

// NewControl returns the control over a registry, its Redis client and
// the event store. clk tells Live whether a node's last beat is recent
// enough to be healthy, as the replicas' Config.Clock tells their
// routing; nil means the real clock.
func NewControl(reg *registry.Registry, rdb redis.UniversalClient, events *Events, clk clock.PassiveClock) *Control {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Control{reg: reg, rdb: rdb, events: events, keys: reg.Keys(), clock: clk}
}

// Drain implements admin.Drainer: the drain is recorded in the database
// (it survives a reconnect), marked on the node's record (no replica
// routes to it from the next snapshot), and sent to the owning replica,
// which stops assigning and sends the node drain. A node that is not
// connected drains when it next registers.
func (c *Control) Drain(ctx context.Context, nodeID string) error {
	if err := c.events.Draining(ctx, nodeID); err != nil {
		return err
	}
	n, err := c.reg.Get(ctx, nodeID)
	if errors.Is(err, registry.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read node %s: %w", nodeID, err)
	}
	if _, err := c.reg.SetState(ctx, nodeID, n.Epoch, registry.StateDraining); err != nil {
		return fmt.Errorf("mark node %s draining: %w", nodeID, err)
	}
	if err := c.send(ctx, header{Node: nodeID}, &nodeproto.Drain{}); err != nil {
		return fmt.Errorf("send drain to node %s: %w", nodeID, err)
	}
	return nil
}

// RevokeNodeToken implements admin.NodeTokenRevoker: the replica holding
// the node's socket sends error 401 and closes it with 1008. The node
// cannot come back: its token no longer verifies.
func (c *Control) RevokeNodeToken(ctx context.Context, nodeID string, tokenID int64) error {
	if err := c.events.Revoked(ctx, nodeID, tokenID); err != nil {
		return err
	}
	return c.send(ctx, header{Node: nodeID, Op: opRevoke}, nil)
}

// Live implements admin.NodeView from the registry's records; a node's
// health is judged at the control's clock.
func (c *Control) Live(ctx context.Context) (map[string]adminwire.NodeLive, error) {
	nodes, err := c.reg.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := make(map[string]adminwire.NodeLive, len(nodes))
	now := c.clock.Now()
	for _, n := range nodes {
		l := adminwire.NodeLive{Healthy: n.Healthy(now), QueueDepth: n.QueueDepth, Running: n.Running,
			KVCacheUsage: n.KVCacheUsage, Draining: n.State == registry.StateDraining, Owner: n.Owner, BeatAt: n.LastSeen,
			EngineDown: n.EngineDown}
		if n.GPUUtil != nil {
			l.GPUUtil = *n.GPUUtil
		}
		out[n.ID] = l
	}
	return out, nil
}

// send publishes a message on the node's channel. Nobody listening means
// the node is not connected, which is not an error.
func (c *Control) send(ctx context.Context, h header, f nodeproto.Frame) error {
	_, err := publish(ctx, c.rdb, c.keys.NodeChannel(h.Node), h, f)
	return err
}
