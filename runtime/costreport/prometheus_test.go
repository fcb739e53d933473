package costreport

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/golden"
)

// The queries the Prometheus source must send for the fixture week, as an
// operator would type them.
const (
	weekGenerationQuery = `sum by (model_name) (increase(vllm:generation_tokens_total[604800s]))`
	weekEngineHours     = `sum by (model_name) (count_over_time(vllm:num_requests_running[604800s:1m])) / 60`
	weekIdleEngineHours = `sum by (model_name) (sum_over_time((count by (model_name) (vllm:num_requests_running)` +
		` unless on (model_name) (sum by (model_name) (increase(vllm:generation_tokens_total[1h])) > 0))[604800s:1h]))`
)

// fakePrometheus serves recorded answers of /api/v1/query by query, and a
// bad_data error (HTTP 400) for any other query. It records what it was
// asked.
type fakePrometheus struct {
	answers map[string]string // query → testdata/prometheus file
	mu      sync.Mutex
	asked   []string // "query @ time"
}

func (f *fakePrometheus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" || r.ParseForm() != nil {
		http.NotFound(w, r)
		return
	}
	q := r.Form.Get("query")
	f.mu.Lock()
	f.asked = append(f.asked, q+" @ "+r.Form.Get("time"))
	f.mu.Unlock()
	file, ok := f.answers[q]
	status := http.StatusOK
	if !ok {
		file, status = "bad_query.json", http.StatusBadRequest
	}
	body, err := os.ReadFile(filepath.Join("testdata", "prometheus", file))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// servePrometheus starts a fake Prometheus with the fixture week's answers.
func servePrometheus(t *testing.T) (*fakePrometheus, *PromClient) {
	t.Helper()
	f := &fakePrometheus{answers: map[string]string{
		weekGenerationQuery: "generation_tokens.json",
		weekEngineHours:     "engine_hours.json",
		weekIdleEngineHours: "idle_engine_hours.json",
	}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, &PromClient{BaseURL: srv.URL, HTTP: srv.Client()}
}

// TestPrometheusReport reports the fixture week with GPU time and engine
// tokens from Prometheus. Its recorded answers hold the engine-hours the
// node events give (llama-8b 168 + 144, qwen-32b 168, llama-70b 14) and
// idle engine-hours 156, 128 and 10, so GPU-hours (× 1, 2 and 4 GPUs per
// replica of the reference workload's profiles) and cost match the node-events report;
// onprem-spare runs no engine, so there is no (none) row. increase()
// extrapolates: llama-8b's engines generated 54,620.4 tokens.
func TestPrometheusReport(t *testing.T) {
	f, client := servePrometheus(t)
	db := fixtureDB(t, dialects[0].dsn(t))
	src := Prometheus{Client: client, Profiles: referenceProfiles()}
	r, err := Generate(context.Background(), db, Options{Window: week, GPU: src, Engine: src})
	if err != nil {
		t.Fatal(err)
	}
	wants := map[string]want{
		"llama-8b": {gpuHours: 312, idle: 156, idlePerWeek: 156, requests: 168, prompt: 126_000, completion: 54_600,
			cost: 780, perMillion: 780 / 0.0546, billed: 0.05796,
			drift: &wantDrift{settled: 54_600, engine: 54_620.4, drift: -20.4 / 54_620.4, within: true}},
		"qwen-32b": {gpuHours: 336, idle: 256, idlePerWeek: 256, requests: 40, prompt: 80_000, completion: 20_000,
			cost: 840, perMillion: 42_000, billed: 0.07,
			drift: &wantDrift{settled: 20_000, engine: 19_800, drift: 200.0 / 19_800, within: false}},
		"llama-70b": {gpuHours: 56, idle: 40, idlePerWeek: 40, requests: 4, prompt: 12_000, completion: 3_200,
			cost: 140, perMillion: 43_750, billed: 0.0216,
			drift: &wantDrift{settled: 3_200, engine: 3_199, drift: 1.0 / 3_199, within: true}},
		"total": {gpuHours: 704, idle: 452, idlePerWeek: 452, requests: 212, prompt: 218_000, completion: 77_800,
			cost: 1_760, perMillion: 1_760 / 0.0778, billed: 0.14956,
			drift: &wantDrift{settled: 77_800, engine: 77_619.4, drift: 180.6 / 77_619.4, within: false}},
	}
	if len(r.Models) != 3 {
		t.Fatalf("got %d rows, want 3", len(r.Models))
	}
	for m, wm := range wants {
		t.Run(m, func(t *testing.T) {
			if m == "total" {
				checkRow(t, r.Total, wm)
				return
			}
			checkRow(t, rowOf(t, r, m), wm)
		})
	}
	t.Run("queries", func(t *testing.T) {
		const at = " @ 2026-03-09T00:00:00Z"
		want := map[string]bool{weekEngineHours + at: true, weekIdleEngineHours + at: true, weekGenerationQuery + at: true}
		if len(f.asked) != len(want) {
			t.Fatalf("asked %q, want %d queries", f.asked, len(want))
		}
		for _, q := range f.asked {
			if !want[q] {
				t.Errorf("asked %q, want one of %v", q, want)
			}
		}
	})
	var table bytes.Buffer
	if err := WriteTable(&table, r); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "week_prometheus.golden.txt", table.Bytes())
}

func TestPrometheusErrors(t *testing.T) {
	_, client := servePrometheus(t)
	db := fixtureDB(t, dialects[1].dsn(t))
	tests := []struct {
		name    string
		opts    Options
		wantErr error
	}{
		{"a window Prometheus has no answer for", Options{Window: Window{From: week.From, To: hour(24)},
			GPU: Prometheus{Client: client, Profiles: referenceProfiles()}}, ErrPrometheus},
		{"a model without a capacity profile", Options{Window: week,
			GPU: Prometheus{Client: client, Profiles: NewProfiles(capacity.Input{})}}, ErrUnknownProfile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Generate(context.Background(), db, tt.opts); !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestParseVector(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		want    []Sample
		wantErr error
	}{
		{"vector", 200, `{"status":"success","data":{"resultType":"vector","result":[` +
			`{"metric":{"model_name":"m"},"value":[1773014400,"1.5e3"]}]}}`,
			[]Sample{{Labels: map[string]string{"model_name": "m"}, Value: 1500}}, nil},
		{"no data is left out", 200, `{"status":"success","data":{"resultType":"vector","result":[` +
			`{"metric":{"model_name":"m"},"value":[1773014400,"NaN"]}]}}`, []Sample{}, nil},
		{"error answer", 422, `{"status":"error","errorType":"execution","error":"query timed out"}`, nil, ErrPrometheus},
		{"not JSON", 502, `<html>bad gateway</html>`, nil, ErrPrometheus},
		{"a matrix", 200, `{"status":"success","data":{"resultType":"matrix","result":[]}}`, nil, ErrPrometheus},
		{"a value that is not a string", 200, `{"status":"success","data":{"resultType":"vector","result":[` +
			`{"metric":{},"value":[1773014400,12]}]}}`, nil, ErrPrometheus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseVector(tt.status, []byte(tt.body))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if err == nil && !equalSamples(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func equalSamples(a, b []Sample) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Value != b[i].Value || len(a[i].Labels) != len(b[i].Labels) {
			return false
		}
		for k, v := range a[i].Labels {
			if b[i].Labels[k] != v {
				return false
			}
		}
	}
	return true
}
