package nodeagent

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// metricsTimeout bounds one scrape of the engine's /metrics: a beat late by
// more than 2 s of a 5 s interval is worth less than a beat without load.
const metricsTimeout = 2 * time.Second

// maxMetricsBytes bounds a scrape's body: vLLM's exposition is tens of KiB.
const maxMetricsBytes = 4 << 20

// vLLM's metric names the heartbeat reads.
const (
	metricWaiting = "vllm:num_requests_waiting"
	metricRunning = "vllm:num_requests_running"
	metricKVUsage = "vllm:kv_cache_usage_perc"
)

// heartbeatLoop beats once at once, then every welcome interval, until ctx
// ends.
func (s *session) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(s.w.Interval())
	defer t.Stop()
	for {
		if !s.send(ctx, s.heartbeat(ctx)) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// heartbeat builds a beat from the engine's metrics; a failed scrape beats
// with the models and drain state only, so the server still sees the node.
func (s *session) heartbeat(ctx context.Context) *nodeproto.Heartbeat {
	s.mu.Lock()
	hb := &nodeproto.Heartbeat{Models: s.a.cfg.modelNames(), Draining: s.draining}
	s.mu.Unlock()
	load, err := scrape(ctx, s.a.cfg.HTTPClient, s.a.cfg.EngineURL)
	if err != nil {
		s.a.cfg.Logger.Warn("scrape engine metrics", "err", err)
		return hb
	}
	hb.QueueDepth, hb.Running, hb.KVCacheUsage = load.waiting, load.running, load.kvUsage
	return hb
}

// engineLoad is what a heartbeat reports of the engine.
type engineLoad struct {
	waiting, running int
	kvUsage          *float64
}

// scrape reads the engine's load from its Prometheus exposition, summing
// each gauge over its label sets (one per served model).
func scrape(ctx context.Context, client *http.Client, engineURL string) (engineLoad, error) {
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, engineURL+"/metrics", nil)
	if err != nil {
		return engineLoad{}, fmt.Errorf("build metrics request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return engineLoad{}, fmt.Errorf("get metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return engineLoad{}, fmt.Errorf("get metrics: status %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(http.MaxBytesReader(nil, resp.Body, maxMetricsBytes))
	if err != nil {
		return engineLoad{}, fmt.Errorf("parse metrics: %w", err)
	}
	var load engineLoad
	if v, ok := gaugeSum(fams[metricWaiting]); ok {
		load.waiting = int(v)
	}
	if v, ok := gaugeSum(fams[metricRunning]); ok {
		load.running = int(v)
	}
	if v, ok := gaugeSum(fams[metricKVUsage]); ok {
		v = min(max(v, 0), 1)
		load.kvUsage = &v
	}
	return load, nil
}

// gaugeSum sums a gauge family's samples, and reports false when absent.
func gaugeSum(f *dto.MetricFamily) (float64, bool) {
	if f == nil || len(f.GetMetric()) == 0 {
		return 0, false
	}
	var sum float64
	for _, m := range f.GetMetric() {
		sum += m.GetGauge().GetValue()
	}
	return sum, true
}
