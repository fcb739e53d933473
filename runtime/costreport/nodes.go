package costreport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/store"
)

// Kinds of node_events that open and close a node's up interval; revoke
// concerns the node's token, and the node's own deregister follows it.
const (
	eventRegister   = "register"
	eventDrain      = "drain"
	eventDeregister = "deregister"
)

// NodeEvents is the GPU-time source of the node registry: a node is up from
// a register event until the next drain or deregister (a second register
// while up, a reconnect, changes nothing), and its GPUs count for the
// models it registered, shared evenly when it registered several. A GPU-hour
// costs its node's GPU kind's price (Profiles.GPUPrice).
type NodeEvents struct {
	DB       *store.DB
	Profiles Profiles
	// CountUnpriced counts the hours of a GPU kind without a price at no
	// cost, as UnpricedGPUHours, instead of failing the report: a page
	// that shows the week must not break because one on-premises node
	// reports a GPU nobody priced.
	CountUnpriced bool
}

var _ GPULessSource = NodeEvents{}

// Name implements GPUTimeSource.
func (NodeEvents) Name() string { return "node events" }

// nodeRow is a node as far as GPU time goes.
type nodeRow struct {
	id       string
	gpus     int
	gpuModel string
	models   []string
}

// nodeEvent is one registration event of a node.
type nodeEvent struct {
	kind string
	at   time.Time
}

// GPUTime implements GPUTimeSource: each up interval, clipped to w, is cut
// at clock hours; an hour's GPU time is idle when the ledger shows no
// settled request of the model arriving in that hour.
func (s NodeEvents) GPUTime(ctx context.Context, w Window, usage LedgerUsage, cat Catalog) (map[string]GPUTime, error) {
	out, _, err := s.GPUTimeAndGPULess(ctx, w, usage, cat)
	return out, err
}

// GPUTimeAndGPULess implements GPULessSource: a node up in w with no GPU
// registered counts nothing, and is named.
func (s NodeEvents) GPUTimeAndGPULess(ctx context.Context, w Window, usage LedgerUsage, cat Catalog) (map[string]GPUTime, []string, error) {
	nodes, err := readNodes(ctx, s.DB)
	if err != nil {
		return nil, nil, err
	}
	events, err := readNodeEvents(ctx, s.DB, w.To)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]GPUTime{}
	var gpuLess []string
	for _, n := range nodes {
		ups := upIntervals(events[n.id], w)
		if len(ups) == 0 {
			continue
		}
		if n.gpus == 0 {
			gpuLess = append(gpuLess, n.id)
			continue
		}
		price, err := s.Profiles.GPUPrice(n.gpuModel)
		unpriced := errors.Is(err, ErrUnknownPrice) && s.CountUnpriced
		if err != nil && !unpriced {
			return nil, nil, fmt.Errorf("node %s: %w", n.id, err)
		}
		models := []string{NoModel}
		if len(n.models) > 0 {
			models = models[:0]
			for _, m := range n.models {
				models = append(models, cat.Name(m))
			}
		}
		share := float64(n.gpus) / float64(len(models))
		for _, m := range models {
			g := nodeTime(ups, share, price, func(t time.Time) bool {
				return m != NoModel && usage.active(m, t)
			})
			if unpriced {
				g.UnpricedGPUHours = g.GPUHours
			}
			out[m] = out[m].add(g)
		}
	}
	return out, gpuLess, nil
}

// nodeTime is the GPU time of gpus GPUs up in ups at price per GPU-hour,
// idle in the clock hours that active says served nothing.
func nodeTime(ups []Window, gpus, price float64, active func(time.Time) bool) GPUTime {
	var g GPUTime
	for _, up := range ups {
		for _, b := range up.hourBuckets() {
			h := b.Hours() * gpus
			g.GPUHours += h
			g.CostUSD += h * price
			if !active(b.From) {
				g.IdleGPUHours += h
			}
		}
	}
	return g
}

// upIntervals turns a node's events, in time order, into the intervals it
// was up, clipped to w. An interval still open at the last event runs to
// the window's end.
func upIntervals(events []nodeEvent, w Window) []Window {
	var (
		out   []Window
		up    bool
		since time.Time
	)
	closeAt := func(t time.Time) {
		if b, ok := w.clip(since, t); ok {
			out = append(out, b)
		}
		up = false
	}
	for _, e := range events {
		switch {
		case e.kind == eventRegister && !up:
			up, since = true, e.at
		case (e.kind == eventDrain || e.kind == eventDeregister) && up:
			closeAt(e.at)
		}
	}
	if up {
		closeAt(w.To)
	}
	return out
}

// readNodes returns every node with its GPUs and registered models.
func readNodes(ctx context.Context, db *store.DB) ([]nodeRow, error) {
	rows, err := db.QueryContext(ctx, "SELECT id, gpus, gpu_model, models FROM nodes ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	defer rows.Close()
	var out []nodeRow
	for rows.Next() {
		var (
			n      nodeRow
			models string
		)
		if err := rows.Scan(&n.id, &n.gpus, &n.gpuModel, &models); err != nil {
			return nil, fmt.Errorf("read nodes: %w", err)
		}
		if n.models, err = modelNames(models); err != nil {
			return nil, fmt.Errorf("read nodes: node %s: %w", n.id, err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	return out, nil
}

// modelNames reads a node's models column: a JSON array of names, or of
// objects with a name.
func modelNames(raw string) ([]string, error) {
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &items); err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	names := make([]string, 0, len(items))
	for _, it := range items {
		var name string
		if err := json.Unmarshal(it, &name); err != nil {
			var obj struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(it, &obj); err != nil || obj.Name == "" {
				return nil, fmt.Errorf("models: %s is neither a name nor an object with a name", it)
			}
			name = obj.Name
		}
		names = append(names, name)
	}
	return names, nil
}

// readNodeEvents returns the register, drain and deregister events before
// to, per node, in time order. Events before the window decide whether a
// node was up when it began.
func readNodeEvents(ctx context.Context, db *store.DB, to time.Time) (map[string][]nodeEvent, error) {
	rows, err := db.QueryContext(ctx, `SELECT node_id, kind, created_at FROM node_events
		WHERE created_at < $1 AND kind IN ('register', 'drain', 'deregister')
		ORDER BY node_id, created_at, id`, ceilMicro(to))
	if err != nil {
		return nil, fmt.Errorf("read node events: %w", err)
	}
	defer rows.Close()
	out := map[string][]nodeEvent{}
	for rows.Next() {
		var (
			id string
			e  nodeEvent
		)
		if err := rows.Scan(&id, &e.kind, &e.at); err != nil {
			return nil, fmt.Errorf("read node events: %w", err)
		}
		out[id] = append(out[id], e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read node events: %w", err)
	}
	return out, nil
}
