package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Get returns the node's live record, or ErrNotFound.
func (r *Registry) Get(ctx context.Context, nodeID string) (Node, error) {
	if err := checkName("node id", nodeID); err != nil {
		return Node{}, err
	}
	h, err := r.rdb.HGetAll(ctx, r.keys.Node(nodeID)).Result()
	if err != nil {
		return Node{}, fmt.Errorf("get node %s: %w", nodeID, err)
	}
	return decodeNode(nodeID, h)
}

// List returns every node with a live record, ordered by id, draining and
// not-yet-healthy ones included (the router filters with Healthy). Members
// of nodes:live whose record is gone are removed from it on the way. A
// record that cannot be decoded is skipped and reported in the error
// together with the nodes that could be read.
func (r *Registry) List(ctx context.Context) ([]Node, error) {
	members, err := r.rdb.ZRangeWithScores(ctx, r.keys.Live(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list live nodes: %w", err)
	}
	if len(members) == 0 {
		return nil, nil
	}
	gets := make([]*redis.MapStringStringCmd, len(members))
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range members {
			gets[i] = p.HGetAll(ctx, r.keys.Node(member(m)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read live nodes: %w", err)
	}
	nodes := make([]Node, 0, len(members))
	var gone []redis.Z
	var bad []error
	for i, m := range members {
		n, err := decodeNode(member(m), gets[i].Val())
		switch {
		case errors.Is(err, ErrNotFound):
			gone = append(gone, m)
		case err != nil:
			bad = append(bad, err)
		default:
			nodes = append(nodes, n)
		}
	}
	if err := r.unindexAll(ctx, gone); err != nil {
		bad = append(bad, err)
	}
	slices.SortFunc(nodes, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
	return nodes, errors.Join(bad...)
}

// ForModel returns the live nodes that serve model, ordered by id. It
// filters List: a router refreshing its view once a second reads all nodes
// anyway, and one index cannot drift from the records the way a second,
// per-model one could.
func (r *Registry) ForModel(ctx context.Context, model string) ([]Node, error) {
	if err := checkName("model", model); err != nil {
		return nil, err
	}
	nodes, err := r.List(ctx)
	return slices.DeleteFunc(nodes, func(n Node) bool {
		_, ok := n.Serves(model)
		return !ok
	}), err
}

// unindexAll removes the given members from nodes:live, each unless it was
// indexed again since it was read.
func (r *Registry) unindexAll(ctx context.Context, gone []redis.Z) error {
	if len(gone) == 0 {
		return nil
	}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range gone {
			r.unindex(ctx, p, member(m), int64(m.Score))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove gone nodes from the live index: %w", err)
	}
	return nil
}

// member returns a sorted-set member's name.
func member(z redis.Z) string {
	s, _ := z.Member.(string)
	return s
}
