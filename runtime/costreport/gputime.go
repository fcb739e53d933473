package costreport

import (
	"context"
)

// NoModel is the report's name for GPU time of nodes that registered no
// model: all of it is idle.
const NoModel = "(none)"

// GPUTime is a model's GPU time in a window and what it cost.
type GPUTime struct {
	GPUHours float64
	// IdleGPUHours is the part of GPUHours in clock hours in which the model
	// served nothing.
	IdleGPUHours float64
	CostUSD      float64
	// UnpricedGPUHours is the part of GPUHours on GPU kinds without a
	// price, left out of CostUSD (NodeEvents.CountUnpriced).
	UnpricedGPUHours float64
}

// add returns g plus o.
func (g GPUTime) add(o GPUTime) GPUTime {
	return GPUTime{GPUHours: g.GPUHours + o.GPUHours, IdleGPUHours: g.IdleGPUHours + o.IdleGPUHours,
		CostUSD: g.CostUSD + o.CostUSD, UnpricedGPUHours: g.UnpricedGPUHours + o.UnpricedGPUHours}
}

// GPUTimeSource tells each model's GPU time in a window.
type GPUTimeSource interface {
	// Name says where the GPU time comes from, for the report.
	Name() string
	// GPUTime returns the GPU time of each model, by the catalog's name,
	// with idle time judged against the ledger's usage or the source's own
	// signal.
	GPUTime(ctx context.Context, w Window, usage LedgerUsage, cat Catalog) (map[string]GPUTime, error)
}

// GPULessSource is a GPUTimeSource that also names the nodes up in the
// window that registered no GPU: their time counts no GPU-hours and no
// GPU cost, which a report of zeros should say rather than leave to be
// guessed (the local mode's simulated engines register none).
type GPULessSource interface {
	GPUTimeSource
	// GPUTimeAndGPULess returns what GPUTime does, and those nodes' ids in
	// order, in one reading.
	GPUTimeAndGPULess(ctx context.Context, w Window, usage LedgerUsage, cat Catalog) (map[string]GPUTime, []string, error)
}

// EngineTokenSource tells how many tokens the engines generated in a window.
type EngineTokenSource interface {
	// Name says where the counts come from, for the report.
	Name() string
	// GenerationTokens returns the increase of vllm:generation_tokens_total
	// in w per model_name (the served name), summed over engines.
	GenerationTokens(ctx context.Context, w Window) (map[string]float64, error)
}
