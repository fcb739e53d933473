package enginemetrics

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Timeout bounds one scrape: a load reading late by more than 2 s of a
// 5 s heartbeat is worth less than a beat without load.
const Timeout = 2 * time.Second

// maxBytes bounds a scrape's body: vLLM's exposition is tens of KiB.
const maxBytes = 4 << 20

// vLLM's metric names.
const (
	MetricWaiting = "vllm:num_requests_waiting"
	MetricRunning = "vllm:num_requests_running"
	MetricKVUsage = "vllm:kv_cache_usage_perc"
)

// Load is an engine's load at one scrape.
type Load struct {
	Waiting, Running int
	// KVCacheUsage is the fraction of KV blocks in use, clamped to [0, 1];
	// nil when the engine does not report it.
	KVCacheUsage *float64
}

// Scrape reads the engine's load from baseURL/metrics, summing each gauge
// over its label sets (one per served model).
func Scrape(ctx context.Context, client *http.Client, baseURL string) (Load, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return Load{}, fmt.Errorf("build metrics request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Load{}, fmt.Errorf("get metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Load{}, fmt.Errorf("get metrics: status %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(http.MaxBytesReader(nil, resp.Body, maxBytes))
	if err != nil {
		return Load{}, fmt.Errorf("parse metrics: %w", err)
	}
	var load Load
	if v, ok := gaugeSum(fams[MetricWaiting]); ok {
		load.Waiting = int(v)
	}
	if v, ok := gaugeSum(fams[MetricRunning]); ok {
		load.Running = int(v)
	}
	if v, ok := gaugeSum(fams[MetricKVUsage]); ok {
		v = min(max(v, 0), 1)
		load.KVCacheUsage = &v
	}
	return load, nil
}

// gaugeSum sums a gauge family's samples, and reports false when absent.
// A family without a TYPE line parses as untyped and counts the same.
func gaugeSum(f *dto.MetricFamily) (float64, bool) {
	if f == nil || len(f.GetMetric()) == 0 {
		return 0, false
	}
	var sum float64
	for _, m := range f.GetMetric() {
		if g := m.GetGauge(); g != nil {
			sum += g.GetValue()
		} else {
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, true
}
