package enginesim

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
)

// TestStateGaugesAgreeAtEveryScrape: requests start and finish while the
// metrics are scraped over and over, and every scrape is one state of the
// engine: a request running holds KV blocks, so running > 0 never comes
// with zero KV usage (a node agent reads both from one scrape, and its
// heartbeat must not report a busy engine with an empty cache).
func TestStateGaugesAgreeAtEveryScrape(t *testing.T) {
	s := newTestSim(t, Config{TimeScale: 1000, Seed: 1})
	runEngine(t, s)
	srv := serve(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	body := chatBody(t, s, "hello there", map[string]any{"max_tokens": 3, "stream": true})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	busy := 0
	for range 5000 {
		mfs, err := s.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		var running, usage float64
		for _, mf := range mfs {
			switch mf.GetName() {
			case "vllm:num_requests_running":
				running = mf.GetMetric()[0].GetGauge().GetValue()
			case "vllm:kv_cache_usage_perc":
				usage = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		if running > 0 {
			busy++
			if usage <= 0 || usage > 1 {
				t.Fatalf("scrape %d: %v requests running with KV usage %v", busy, running, usage)
			}
		}
	}
	cancel()
	wg.Wait()
	if busy == 0 {
		t.Fatal("no scrape saw a request running")
	}
	http.DefaultClient.CloseIdleConnections()
}
