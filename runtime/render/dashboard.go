package render

import "encoding/json"

// panel is one Grafana time-series panel.
type panel struct {
	Title   string   `json:"title"`
	Type    string   `json:"type"`
	GridPos gridPos  `json:"gridPos"`
	Targets []target `json:"targets"`
}

type gridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

type target struct {
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
}

// dashboard is the platform's Grafana dashboard: time to first token,
// tokens per second, queue depth, KV use per model, 429 and 503 rates,
// goroutines, ledger drift and GPU use, as one line of JSON.
func dashboard(p Platform) string {
	type q struct{ expr, legend string }
	rows := []struct {
		title   string
		queries []q
	}{
		{"Time to first token p50 / p95", []q{
			{`histogram_quantile(0.5, sum by (le, model) (rate(llmplat_gateway_time_to_first_token_seconds_bucket[5m])))`, "p50 {{model}}"},
			{`histogram_quantile(0.95, sum by (le, model) (rate(llmplat_gateway_time_to_first_token_seconds_bucket[5m])))`, "p95 {{model}}"},
		}},
		{"Output tokens per second", []q{
			{`sum by (model_name) (rate(vllm:generation_tokens_total[5m]))`, "engines {{model_name}}"},
			{`histogram_quantile(0.5, sum by (le, model) (rate(llmplat_gateway_stream_tokens_per_second_bucket[5m])))`, "per stream p50 {{model}}"},
		}},
		{"Queue depth", []q{
			{`max by (model) (llmplat_model_pending_requests)`, "platform {{model}}"},
			{`sum by (model_name) (vllm:num_requests_waiting)`, "engines {{model_name}}"},
		}},
		{"KV cache use", []q{{`avg by (model_name) (vllm:kv_cache_usage_perc)`, "{{model_name}}"}}},
		{"429 and 503 per second", []q{{`sum by (code) (rate(llmplat_gateway_rejections_total{code=~"429|503"}[5m]))`, "{{code}}"}}},
		{"Goroutines", []q{{`go_goroutines{namespace="` + p.Namespace + `"}`, "{{pod}}"}}},
		{"Ledger drift (billed vs engine completion tokens)", []q{{`(sum(rate(llmplat_gateway_settled_tokens_total{kind="completion"}[1h])) - (sum(rate(vllm:generation_tokens_total[1h])) or vector(0)) - (sum(rate(llmplat_orchestrator_onprem_completion_tokens_total[1h])) or vector(0))) / sum(rate(llmplat_gateway_settled_tokens_total{kind="completion"}[1h]))`, "drift"}}},
		{"GPU engine active", []q{{`avg by (Hostname, gpu) (DCGM_FI_PROF_GR_ENGINE_ACTIVE)`, "{{Hostname}} {{gpu}}"}}},
	}
	panels := make([]panel, len(rows))
	for i, r := range rows {
		panels[i] = panel{Title: r.title, Type: "timeseries", GridPos: gridPos{H: 8, W: 12, X: 12 * (i % 2), Y: 8 * (i / 2)}}
		for _, qq := range r.queries {
			panels[i].Targets = append(panels[i].Targets, target{Expr: qq.expr, LegendFormat: qq.legend})
		}
	}
	b, _ := json.Marshal(map[string]any{ // strings and ints: always encodes
		"title": "llmplat", "uid": "llmplat", "schemaVersion": 39, "refresh": "30s",
		"time": map[string]string{"from": "now-6h", "to": "now"}, "panels": panels,
	})
	return string(b)
}
