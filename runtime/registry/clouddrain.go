package registry

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// MarkCloudDraining marks the cloud nodes draining for ttl, with reason as
// the marks' value. A cloud node's id is its pod's name, never reused, so
// the mark only has to outlive the pod: its TTL spares a sweeper.
func (r *Registry) MarkCloudDraining(ctx context.Context, nodeIDs []string, reason string, ttl time.Duration) error {
	if len(nodeIDs) == 0 {
		return nil
	}
	if ttl <= 0 {
		return invalid("cloud drain ttl %v", ttl)
	}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range nodeIDs {
			p.Set(ctx, r.keys.CloudDrain(id), reason, ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("registry: mark cloud nodes draining: %w", err)
	}
	return nil
}

// CloudDraining reports which of the cloud nodes are marked draining.
func (r *Registry) CloudDraining(ctx context.Context, nodeIDs []string) (map[string]bool, error) {
	out := make(map[string]bool, len(nodeIDs))
	if len(nodeIDs) == 0 {
		return out, nil
	}
	cmds := make([]*redis.IntCmd, len(nodeIDs))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range nodeIDs {
			cmds[i] = p.Exists(ctx, r.keys.CloudDrain(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("registry: read cloud drain marks: %w", err)
	}
	for i, id := range nodeIDs {
		if cmds[i].Val() > 0 {
			out[id] = true
		}
	}
	return out, nil
}

// ClearCloudDraining takes the drain marks off the cloud nodes: they take
// work again.
func (r *Registry) ClearCloudDraining(ctx context.Context, nodeIDs []string) error {
	if len(nodeIDs) == 0 {
		return nil
	}
	keys := make([]string, len(nodeIDs))
	for i, id := range nodeIDs {
		keys[i] = r.keys.CloudDrain(id)
	}
	if err := r.rdb.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("registry: clear cloud drain marks: %w", err)
	}
	return nil
}
