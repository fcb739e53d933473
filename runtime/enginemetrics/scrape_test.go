package enginemetrics

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmplat/llmplat/runtime/enginesim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestScrapeSimulator reads the simulator's exposition, which uses vLLM's
// names: an idle engine reports zero load and a KV usage of 0.
func TestScrapeSimulator(t *testing.T) {
	sim, err := enginesim.New(enginesim.Config{TimeScale: 20})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sim.Serve(ctx, ln) }()
	defer func() {
		cancel()
		<-done
	}()
	got, err := Scrape(t.Context(), http.DefaultClient, "http://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got.Waiting != 0 || got.Running != 0 || got.KVCacheUsage == nil || *got.KVCacheUsage != 0 {
		t.Errorf("idle engine load = %+v, want zero load with KV usage 0", got)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestScrapeSumsAndClamps sums every label set and clamps KV usage; a
// missing gauge stays absent.
func TestScrapeSumsAndClamps(t *testing.T) {
	tests := []struct {
		name, body       string
		waiting, running int
		kv               *float64
	}{
		{"two models", "vllm:num_requests_waiting{model_name=\"a\"} 2\nvllm:num_requests_waiting{model_name=\"b\"} 3\n" +
			"vllm:num_requests_running{model_name=\"a\"} 7\nvllm:kv_cache_usage_perc{model_name=\"a\"} 0.25\n", 5, 7, ptr(0.25)},
		{"usage over one", "vllm:kv_cache_usage_perc 1.5\n", 0, 0, ptr(1)},
		{"no kv gauge", "vllm:num_requests_running 1\n", 0, 1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			got, err := Scrape(t.Context(), srv.Client(), srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			if got.Waiting != tc.waiting || got.Running != tc.running || !sameFloat(got.KVCacheUsage, tc.kv) {
				t.Errorf("Scrape = %+v (kv %v), want waiting %d running %d kv %v", got, deref(got.KVCacheUsage), tc.waiting, tc.running, deref(tc.kv))
			}
		})
	}
}

// TestScrapeFailures reports a bad status and an unreachable engine.
func TestScrapeFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	url := srv.URL
	if _, err := Scrape(t.Context(), srv.Client(), url); err == nil {
		t.Error("Scrape of a 503 succeeded")
	}
	srv.Close()
	if _, err := Scrape(t.Context(), http.DefaultClient, url); err == nil {
		t.Error("Scrape of a closed server succeeded")
	}
}

func ptr(v float64) *float64 { return &v }

func sameFloat(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
