package costreport

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/llmplat/llmplat/runtime/store"
)

// DefaultDriftTarget is the required target for ledger drift: under 0.1 %.
const DefaultDriftTarget = 0.001

// Report is a cost and drift report: one row per model, then the total.
// Its JSON names carry their units.
type Report struct {
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	WindowHours float64   `json:"window_hours"`
	// GPUTimeSource and EngineTokenSource say where the numbers came from;
	// EngineTokenSource is empty when no engine counts were given, and then
	// no row has a drift.
	GPUTimeSource     string        `json:"gpu_time_source"`
	EngineTokenSource string        `json:"engine_token_source"`
	DriftTarget       float64       `json:"drift_target"`
	Models            []ModelReport `json:"models"`
	Total             ModelReport   `json:"total"`
	// NodesWithoutGPUs are the nodes up in the window that registered no
	// GPU (a GPULessSource tells them): their time counts no GPU-hours.
	NodesWithoutGPUs []string `json:"nodes_without_gpus,omitempty"`
}

// ModelReport is one model's GPU time, tokens, cost and drift.
type ModelReport struct {
	Model      string  `json:"model"`
	ServedName string  `json:"served_name"`
	GPUHours   float64 `json:"gpu_hours"`
	// IdleGPUHours is GPU time in hours in which the model served nothing;
	// IdleGPUHoursPerWeek scales it to a week.
	IdleGPUHours        float64 `json:"idle_gpu_hours"`
	IdleGPUHoursPerWeek float64 `json:"idle_gpu_hours_per_week"`
	Requests            int64   `json:"requests"`
	PromptTokens        int64   `json:"prompt_tokens"`
	CompletionTokens    int64   `json:"completion_tokens"`
	// BilledUSD is what the ledger charged the teams.
	BilledUSD float64 `json:"billed_usd"`
	// CostUSD is the GPU time at its price per GPU-hour.
	CostUSD float64 `json:"cost_usd"`
	// UnpricedGPUHours is the part of GPUHours on GPU kinds without a
	// price, left out of CostUSD.
	UnpricedGPUHours float64 `json:"unpriced_gpu_hours,omitempty"`
	// CostPerMillionOutputTokensUSD is CostUSD per million completion
	// tokens; null when the model produced none.
	CostPerMillionOutputTokensUSD *float64 `json:"cost_usd_per_million_output_tokens"`
	// Drift is null without engine counts.
	Drift *Drift      `json:"drift"`
	Teams []TeamUsage `json:"teams"`
}

// Drift compares the ledger with the engines: (settled completion tokens −
// engine generation tokens) ÷ engine generation tokens.
type Drift struct {
	SettledCompletionTokens int64   `json:"settled_completion_tokens"`
	EngineGenerationTokens  float64 `json:"engine_generation_tokens"`
	// Drift is null when the engines counted nothing but the ledger settled
	// tokens: the ratio is unbounded.
	Drift        *float64 `json:"drift"`
	WithinTarget bool     `json:"within_target"`
}

// Options say what a report covers and where its numbers come from.
type Options struct {
	Window Window
	// GPU is where GPU time comes from; required.
	GPU GPUTimeSource
	// Engine is where engine token counts come from; nil leaves drift out.
	Engine EngineTokenSource
	// DriftTarget is the largest drift that passes; zero means
	// DefaultDriftTarget.
	DriftTarget float64
}

// Generate reads the ledger and the sources and builds the report.
func Generate(ctx context.Context, db *store.DB, o Options) (Report, error) {
	if err := o.Window.Validate(); err != nil {
		return Report{}, err
	}
	if o.DriftTarget == 0 {
		o.DriftTarget = DefaultDriftTarget
	}
	cat, err := ReadCatalog(ctx, db)
	if err != nil {
		return Report{}, err
	}
	usage, err := ReadLedger(ctx, db, o.Window)
	if err != nil {
		return Report{}, err
	}
	var (
		gpu     map[string]GPUTime
		gpuLess []string
	)
	if s, ok := o.GPU.(GPULessSource); ok {
		gpu, gpuLess, err = s.GPUTimeAndGPULess(ctx, o.Window, usage, cat)
	} else {
		gpu, err = o.GPU.GPUTime(ctx, o.Window, usage, cat)
	}
	if err != nil {
		return Report{}, fmt.Errorf("gpu time from %s: %w", o.GPU.Name(), err)
	}
	r := Report{From: o.Window.From.UTC(), To: o.Window.To.UTC(), WindowHours: o.Window.Hours(),
		GPUTimeSource: o.GPU.Name(), DriftTarget: o.DriftTarget, NodesWithoutGPUs: gpuLess}
	var engine map[string]float64
	if o.Engine != nil {
		raw, err := o.Engine.GenerationTokens(ctx, o.Window)
		if err != nil {
			return Report{}, fmt.Errorf("engine tokens from %s: %w", o.Engine.Name(), err)
		}
		engine = map[string]float64{}
		for served, v := range raw {
			engine[cat.Name(served)] += v
		}
		r.EngineTokenSource = o.Engine.Name()
	}
	build(&r, cat, usage, gpu, engine)
	return r, nil
}

// build fills the rows and the total of r: every model with GPU time,
// settled tokens or engine counts, by name, NoModel last.
func build(r *Report, cat Catalog, usage LedgerUsage, gpu map[string]GPUTime, engine map[string]float64) {
	teams := map[string][]TeamUsage{}
	for m, ts := range usage.Teams {
		teams[cat.Name(m)] = append(teams[cat.Name(m)], ts...)
	}
	seen := map[string]bool{}
	for _, set := range []map[string]bool{keys(teams), keys(gpu), keys(engine)} {
		for m := range set {
			seen[m] = true
		}
	}
	names := make([]string, 0, len(seen))
	for m := range seen {
		names = append(names, m)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == NoModel) != (names[j] == NoModel) {
			return names[j] == NoModel
		}
		return names[i] < names[j]
	})
	total := ModelReport{Model: "total", Teams: []TeamUsage{}}
	var totalEngine float64
	for _, m := range names {
		row := ModelReport{Model: m, ServedName: cat.ServedName(m), Teams: teams[m]}
		if row.Teams == nil {
			row.Teams = []TeamUsage{}
		}
		g := gpu[m]
		row.GPUHours, row.IdleGPUHours, row.CostUSD, row.UnpricedGPUHours = g.GPUHours, g.IdleGPUHours, g.CostUSD, g.UnpricedGPUHours
		var billed int64
		for _, t := range row.Teams {
			row.Requests += t.Requests
			row.PromptTokens += t.PromptTokens
			row.CompletionTokens += t.CompletionTokens
			billed += t.BilledMicrocredits
		}
		row.BilledUSD = float64(billed) / 1e6
		if engine != nil && m != NoModel {
			row.Drift = newDrift(row.CompletionTokens, engine[m], r.DriftTarget)
			totalEngine += engine[m]
		}
		finish(&row, r.WindowHours)
		r.Models = append(r.Models, row)
		total.GPUHours += row.GPUHours
		total.IdleGPUHours += row.IdleGPUHours
		total.CostUSD += row.CostUSD
		total.UnpricedGPUHours += row.UnpricedGPUHours
		total.Requests += row.Requests
		total.PromptTokens += row.PromptTokens
		total.CompletionTokens += row.CompletionTokens
		total.BilledUSD += row.BilledUSD
	}
	if engine != nil {
		total.Drift = newDrift(total.CompletionTokens, totalEngine, r.DriftTarget)
	}
	finish(&total, r.WindowHours)
	r.Total = total
}

// finish fills a row's ratios from its sums.
func finish(row *ModelReport, windowHours float64) {
	row.IdleGPUHoursPerWeek = row.IdleGPUHours * HoursPerWeek / windowHours
	if row.CompletionTokens > 0 {
		v := row.CostUSD / (float64(row.CompletionTokens) / 1e6)
		row.CostPerMillionOutputTokensUSD = &v
	}
}

// newDrift compares settled completion tokens with engine tokens. Nothing
// settled and nothing generated is no drift.
func newDrift(settled int64, engine, target float64) *Drift {
	d := &Drift{SettledCompletionTokens: settled, EngineGenerationTokens: engine}
	switch {
	case engine > 0:
		v := (float64(settled) - engine) / engine
		d.Drift, d.WithinTarget = &v, math.Abs(v) <= target
	case settled == 0:
		v := 0.0
		d.Drift, d.WithinTarget = &v, true
	}
	return d
}

// keys returns the key set of a map.
func keys[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}
