package costreport

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Prometheus is the GPU-time and engine-token source of a Prometheus server
// that scrapes every engine's /metrics. An engine is up while its
// vllm:num_requests_running series exists; its GPUs are its model's
// capacity profile's GPUs per replica, priced as the profile's GPU kind.
type Prometheus struct {
	Client   *PromClient
	Profiles Profiles
}

var (
	_ GPUTimeSource     = Prometheus{}
	_ EngineTokenSource = Prometheus{}
)

// Name implements GPUTimeSource and EngineTokenSource.
func (Prometheus) Name() string { return "prometheus" }

// promDuration writes d as a Prometheus duration in whole seconds.
func promDuration(d time.Duration) string {
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}

// generationQuery is the tokens each model's engines generated in w;
// increase() handles counter resets.
func generationQuery(w Window) string {
	return fmt.Sprintf(`sum by (model_name) (increase(vllm:generation_tokens_total[%s]))`, promDuration(w.Duration()))
}

// engineHoursQuery is each model's engine-hours in w: one sample a minute
// for every engine series that exists, over 60.
func engineHoursQuery(w Window) string {
	return fmt.Sprintf(`sum by (model_name) (count_over_time(vllm:num_requests_running[%s:1m])) / 60`,
		promDuration(w.Duration()))
}

// idleEngineHoursQuery is each model's engine-hours in w in the hours in
// which its engines generated no token: every hour, the engines up, unless
// the model generated in the hour before; summed over the hours.
func idleEngineHoursQuery(w Window) string {
	return fmt.Sprintf(`sum by (model_name) (sum_over_time((count by (model_name) (vllm:num_requests_running)`+
		` unless on (model_name) (sum by (model_name) (increase(vllm:generation_tokens_total[1h])) > 0))[%s:1h]))`,
		promDuration(w.Duration()))
}

// byModel runs an instant query at the window's end and returns its values
// by model_name.
func (p Prometheus) byModel(ctx context.Context, query string, w Window) (map[string]float64, error) {
	samples, err := p.Client.Query(ctx, query, w.To)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		out[s.Labels[modelNameLabel]] += s.Value
	}
	return out, nil
}

// GenerationTokens implements EngineTokenSource.
func (p Prometheus) GenerationTokens(ctx context.Context, w Window) (map[string]float64, error) {
	return p.byModel(ctx, generationQuery(w), w)
}

// GPUTime implements GPUTimeSource: engine-hours and idle engine-hours
// times the GPUs per replica of each model's profile. Idle is judged by the
// engines' own counter, not the ledger.
func (p Prometheus) GPUTime(ctx context.Context, w Window, _ LedgerUsage, cat Catalog) (map[string]GPUTime, error) {
	hours, err := p.byModel(ctx, engineHoursQuery(w), w)
	if err != nil {
		return nil, fmt.Errorf("engine hours: %w", err)
	}
	idle, err := p.byModel(ctx, idleEngineHoursQuery(w), w)
	if err != nil {
		return nil, fmt.Errorf("idle engine hours: %w", err)
	}
	out := map[string]GPUTime{}
	for served, h := range hours {
		d, err := p.Profiles.Deployment(served)
		if err != nil {
			return nil, err
		}
		price, err := p.Profiles.GPUPrice(d.GPU.Name)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", served, err)
		}
		tp := float64(d.TP)
		name := cat.Name(served)
		out[name] = out[name].add(GPUTime{GPUHours: h * tp, IdleGPUHours: idle[served] * tp, CostUSD: h * tp * price})
	}
	return out, nil
}
