package admin

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/adminrules"
	"github.com/llmplat/llmplat/runtime/adminwire"
)

// Limits on a node declaration, each with its reason.
const (
	// maxDeclaredModels bounds a node's models: one engine serves a
	// handful; a hundred is a mistake, not a need.
	maxDeclaredModels = 100
	// maxURLLen fits any orchestrator or engine URL with room.
	maxURLLen = 2048
)

// validateNodeDeclaration checks a declaration's bounds; the agent's own parser, not the
// server, judges the URLs and names it will use.
func validateNodeDeclaration(s *adminwire.NodeDeclarationSpec) *fieldError {
	switch {
	case s.OrchestratorURL == "" || len(s.OrchestratorURL) > maxURLLen:
		return invalid("orchestrator_url", "orchestrator_url must be 1 to %d bytes", maxURLLen)
	case len(s.EngineURL) > maxURLLen:
		return invalid("engine_url", "engine_url must be at most %d bytes", maxURLLen)
	case len(s.Models) == 0 || len(s.Models) > maxDeclaredModels:
		return invalid("models", "models must hold 1 to %d models", maxDeclaredModels)
	}
	if s.GPUCount != nil {
		if e := adminrules.NodeCount("gpu_count", *s.GPUCount); e != nil {
			return refused(e)
		}
	}
	if e := adminrules.NodeLabels(s.Labels); e != nil {
		return refused(e)
	}
	for i, m := range s.Models {
		if e := checkIdent(fmt.Sprintf("models[%d].name", i), m.Name); e != nil {
			return e
		}
		if e := adminrules.ServedName(m.ServedName); e != nil {
			return invalid(fmt.Sprintf("models[%d].served_name", i), "%s", e.Msg)
		}
		for _, c := range []struct {
			field string
			v     int64
		}{{"max_num_seqs", m.MaxNumSeqs}, {"max_model_len", m.MaxModelLen}, {"kv_cache_tokens", m.KVCacheTokens}} {
			if e := adminrules.NodeCount(fmt.Sprintf("models[%d].%s", i, c.field), c.v); e != nil {
				return refused(e)
			}
		}
	}
	return nil
}

// nodeDeclColumns are the node_declarations columns scanNodeDecl reads.
const nodeDeclColumns = "node_id, orchestrator_url, engine_url, models, gpu_count, labels, updated_at"

// scanNodeDecl reads one declaration selected with nodeDeclColumns.
func scanNodeDecl(r rowScanner) (adminwire.NodeDeclaration, error) {
	var (
		d      adminwire.NodeDeclaration
		models string
		labels sql.NullString
		gpus   sql.NullInt64
	)
	if err := r.Scan(&d.NodeID, &d.OrchestratorURL, &d.EngineURL, &models, &gpus, &labels, &d.UpdatedAt); err != nil {
		return adminwire.NodeDeclaration{}, err
	}
	if err := json.Unmarshal([]byte(models), &d.Models); err != nil {
		return adminwire.NodeDeclaration{}, fmt.Errorf("models of node %s: %w", d.NodeID, err)
	}
	if labels.Valid {
		if err := json.Unmarshal([]byte(labels.String), &d.Labels); err != nil {
			return adminwire.NodeDeclaration{}, fmt.Errorf("labels of node %s: %w", d.NodeID, err)
		}
	}
	if gpus.Valid {
		d.GPUCount = &gpus.Int64
	}
	d.UpdatedAt = d.UpdatedAt.UTC()
	return d, nil
}

// PutNodeDeclaration stores spec as nodeID's declaration, replacing any.
func (s *SQLStore) PutNodeDeclaration(ctx context.Context, nodeID string, spec adminwire.NodeDeclarationSpec, now time.Time) (adminwire.NodeDeclaration, error) {
	models, err := json.Marshal(spec.Models)
	if err != nil {
		return adminwire.NodeDeclaration{}, fmt.Errorf("put node declaration: %w", err)
	}
	var labels, gpus any
	if spec.Labels != nil {
		b, err := json.Marshal(spec.Labels)
		if err != nil {
			return adminwire.NodeDeclaration{}, fmt.Errorf("put node declaration: %w", err)
		}
		labels = string(b)
	}
	if spec.GPUCount != nil {
		gpus = *spec.GPUCount
	}
	d, err := scanNodeDecl(s.db.QueryRowContext(ctx, `INSERT INTO node_declarations
		(node_id, orchestrator_url, engine_url, models, gpu_count, labels, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (node_id) DO UPDATE SET orchestrator_url = excluded.orchestrator_url,
		  engine_url = excluded.engine_url, models = excluded.models, gpu_count = excluded.gpu_count,
		  labels = excluded.labels, updated_at = excluded.updated_at
		RETURNING `+nodeDeclColumns, nodeID, spec.OrchestratorURL, spec.EngineURL, string(models), gpus, labels, now))
	if err != nil {
		return adminwire.NodeDeclaration{}, fmt.Errorf("put node declaration: %w", err)
	}
	return d, nil
}

// GetNodeDeclaration returns nodeID's declaration, or ErrNotFound.
func (s *SQLStore) GetNodeDeclaration(ctx context.Context, nodeID string) (adminwire.NodeDeclaration, error) {
	d, err := scanNodeDecl(s.db.QueryRowContext(ctx, "SELECT "+nodeDeclColumns+" FROM node_declarations WHERE node_id = $1", nodeID))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return adminwire.NodeDeclaration{}, fmt.Errorf("node declaration %q: %w", nodeID, ErrNotFound)
	case err != nil:
		return adminwire.NodeDeclaration{}, fmt.Errorf("read node declaration: %w", err)
	}
	return d, nil
}

// ListNodeDeclarations returns every declaration by node id.
func (s *SQLStore) ListNodeDeclarations(ctx context.Context) (map[string]adminwire.NodeDeclaration, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+nodeDeclColumns+" FROM node_declarations")
	if err != nil {
		return nil, fmt.Errorf("list node declarations: %w", err)
	}
	defer rows.Close()
	out := map[string]adminwire.NodeDeclaration{}
	for rows.Next() {
		d, err := scanNodeDecl(rows)
		if err != nil {
			return nil, fmt.Errorf("list node declarations: %w", err)
		}
		out[d.NodeID] = d
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list node declarations: %w", err)
	}
	return out, nil
}

// DeleteNodeDeclaration removes nodeID's declaration; removing none is no
// error, so a retried delete succeeds.
func (s *SQLStore) DeleteNodeDeclaration(ctx context.Context, nodeID string) error {
	if _, err := s.db.ExecContext(ctx, "DELETE FROM node_declarations WHERE node_id = $1", nodeID); err != nil {
		return fmt.Errorf("delete node declaration: %w", err)
	}
	return nil
}
