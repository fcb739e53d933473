package orchestrator

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/store"
)

// Durable node states (nodes.state).
const (
	stateActive   = "active"
	stateDraining = "draining"
	stateDrained  = "drained"
)

// Events records in PostgreSQL what outlives a socket: each node's
// registration (the nodes row) and its registrations, drains and
// departures (node_events). Heartbeats never reach it.
type Events struct {
	db    *store.DB
	clock clock.PassiveClock
}

// NewEvents returns the event store over a migrated database, dating what
// it records by clk: the replica's Config.Clock, so a test that fakes the
// replica's time fakes its records' too. Nil means the real clock.
func NewEvents(db *store.DB, clk clock.PassiveClock) *Events {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Events{db: db, clock: clk}
}

// Registered upserts the node's row and records the registration, dated
// at the time it was admitted (zero means now). It returns the node's durable state: a drain survives a reconnect, while a
// node that finished a drain and registers again is active.
func (e *Events) Registered(ctx context.Context, rec registry.NodeRecord, admitted time.Time) (string, error) {
	models, err := json.Marshal(nonNil(rec.Models))
	if err != nil {
		return "", fmt.Errorf("encode models: %w", err)
	}
	gpuModel := ""
	if len(rec.GPUs) > 0 {
		gpuModel = rec.GPUs[0].Name
	}
	var serviceURL sql.NullString
	if rec.ServiceURL != "" {
		serviceURL = sql.NullString{String: rec.ServiceURL, Valid: true}
	}
	now := e.clock.Now().UTC()
	at := now
	if !admitted.IsZero() {
		at = admitted.UTC()
	}
	var state string
	err = e.db.InTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, "SELECT state FROM nodes WHERE id = $1", rec.ID).Scan(&state)
		switch {
		case errors.Is(err, sql.ErrNoRows), err == nil && state != stateDraining:
			state = stateActive
		case err != nil:
			return fmt.Errorf("read node: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO nodes (id, location, gpus, gpu_model, models, service_url, last_seen, orchestrator_id, state, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $7)
ON CONFLICT (id) DO UPDATE SET location = excluded.location, gpus = excluded.gpus, gpu_model = excluded.gpu_model,
  models = excluded.models, service_url = excluded.service_url, last_seen = excluded.last_seen,
  orchestrator_id = excluded.orchestrator_id, state = excluded.state`,
			rec.ID, string(rec.Location), len(rec.GPUs), gpuModel, string(models), serviceURL, now, rec.Owner, state); err != nil {
			return fmt.Errorf("upsert node: %w", err)
		}
		return insertEvent(ctx, tx, rec.ID, "register", rec.Owner, rec.Version, at)
	})
	if err != nil {
		return "", fmt.Errorf("record registration of %s: %w", rec.ID, err)
	}
	return state, nil
}

// Draining records an operator's drain; the node need not be connected.
func (e *Events) Draining(ctx context.Context, nodeID string) error {
	now := e.clock.Now().UTC()
	err := e.db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE nodes SET state = $1 WHERE id = $2", stateDraining, nodeID)
		if err != nil {
			return fmt.Errorf("update node: %w", err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("node %q: %w", nodeID, admin.ErrNodeNotFound)
		}
		return insertEvent(ctx, tx, nodeID, "drain", "", "", now)
	})
	if err != nil {
		return fmt.Errorf("record drain of %s: %w", nodeID, err)
	}
	return nil
}

// CloudDraining records, by replica, that a cloud node was drained for
// reason (its Kubernetes Node is being disrupted). A cloud node has no row
// in nodes: only the event is kept.
func (e *Events) CloudDraining(ctx context.Context, nodeID, replica, reason string) error {
	now := e.clock.Now().UTC()
	err := e.db.InTx(ctx, func(tx *sql.Tx) error {
		return insertEvent(ctx, tx, nodeID, "drain", replica, reason, now)
	})
	if err != nil {
		return fmt.Errorf("record drain of cloud node %s: %w", nodeID, err)
	}
	return nil
}

// Departed records a socket's end; drained says the node finished a drain.
func (e *Events) Departed(ctx context.Context, nodeID, replica string, drained bool) error {
	now := e.clock.Now().UTC()
	err := e.db.InTx(ctx, func(tx *sql.Tx) error {
		q := "UPDATE nodes SET last_seen = $1 WHERE id = $2"
		args := []any{now, nodeID}
		if drained {
			q = "UPDATE nodes SET last_seen = $1, state = $3 WHERE id = $2"
			args = append(args, stateDrained)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("update node: %w", err)
		}
		detail := ""
		if drained {
			detail = stateDrained
		}
		return insertEvent(ctx, tx, nodeID, "deregister", replica, detail, now)
	})
	if err != nil {
		return fmt.Errorf("record departure of %s: %w", nodeID, err)
	}
	return nil
}

// Revoked records that a node's token was revoked.
func (e *Events) Revoked(ctx context.Context, nodeID string, tokenID int64) error {
	now := e.clock.Now().UTC()
	return e.db.InTx(ctx, func(tx *sql.Tx) error {
		return insertEvent(ctx, tx, nodeID, "revoke", "", fmt.Sprintf("token %d", tokenID), now)
	})
}

// insertEvent appends one node_events row.
func insertEvent(ctx context.Context, tx *sql.Tx, nodeID, kind, replica, detail string, at time.Time) error {
	var orch sql.NullString
	if replica != "" {
		orch = sql.NullString{String: replica, Valid: true}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO node_events (node_id, kind, orchestrator_id, detail, created_at) VALUES ($1, $2, $3, $4, $5)",
		nodeID, kind, orch, detail, at); err != nil {
		return fmt.Errorf("insert %s event: %w", kind, err)
	}
	return nil
}

// nonNil returns s, or an empty slice for nil, so it encodes as [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
