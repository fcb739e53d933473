package admin

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// nodeColumns are the nodes columns scanNode reads, in order.
const nodeColumns = `id, location, gpus, gpu_model, models, service_url, last_seen, orchestrator_id, state, created_at`

// scanNode reads one node selected with nodeColumns.
func scanNode(r rowScanner) (adminwire.Node, error) {
	var (
		n                  adminwire.Node
		models             string
		serviceURL, orchID sql.NullString
		lastSeen           sql.NullTime
	)
	if err := r.Scan(&n.ID, &n.Location, &n.GPUs, &n.GPUModel, &models, &serviceURL, &lastSeen, &orchID,
		&n.State, &n.CreatedAt); err != nil {
		return adminwire.Node{}, err
	}
	if !json.Valid([]byte(models)) {
		return adminwire.Node{}, fmt.Errorf("models of node %s are not JSON", n.ID)
	}
	n.Models = json.RawMessage(models)
	n.ServiceURL, n.OrchestratorID = serviceURL.String, orchID.String
	n.LastSeen = nullTime(lastSeen)
	n.CreatedAt = n.CreatedAt.UTC()
	return n, nil
}

// ListNodes returns every registered node by id, without live state.
func (s *SQLStore) ListNodes(ctx context.Context) ([]adminwire.Node, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+nodeColumns+" FROM nodes ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	nodes := []adminwire.Node{}
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		nodes = append(nodes, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return nodes, nil
}

// GetNode returns the registered node with id, or ErrNodeNotFound.
func (s *SQLStore) GetNode(ctx context.Context, id string) (adminwire.Node, error) {
	n, err := scanNode(s.db.QueryRowContext(ctx, "SELECT "+nodeColumns+" FROM nodes WHERE id = $1", id))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return adminwire.Node{}, fmt.Errorf("node %q: %w", id, ErrNodeNotFound)
	case err != nil:
		return adminwire.Node{}, fmt.Errorf("read node: %w", err)
	}
	return n, nil
}
