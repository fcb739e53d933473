package nodeagent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

func TestScrape(t *testing.T) {
	tests := []struct {
		file             string
		waiting, running int
		kv               float64 // -1: absent
	}{
		{"two_models.prom", 7, 7, 0.75},
		{"no_kv.prom", 0, 1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/metrics" {
					http.NotFound(w, r)
					return
				}
				w.Write(body)
			}))
			defer srv.Close()
			got, err := scrape(context.Background(), srv.Client(), srv.URL)
			if err != nil {
				t.Fatalf("scrape: %v", err)
			}
			if got.waiting != tt.waiting || got.running != tt.running {
				t.Errorf("waiting, running = %d, %d, want %d, %d", got.waiting, got.running, tt.waiting, tt.running)
			}
			switch {
			case tt.kv < 0 && got.kvUsage != nil:
				t.Errorf("kv usage = %v, want absent", *got.kvUsage)
			case tt.kv >= 0 && (got.kvUsage == nil || *got.kvUsage != tt.kv):
				t.Errorf("kv usage = %v, want %v", got.kvUsage, tt.kv)
			}
		})
	}
}

func TestHeartbeatReportsEngineLoad(t *testing.T) {
	sim, engineURL := newSim(t)
	fs := newFakeServer(t, nil)
	startAgent(t, fs, sim, engineURL)
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-h", testModel, sim.ServedModelName(), 3000))
	deadline := time.Now().Add(waitFor)
	for {
		f := sc.nextAny(t)
		hb, ok := f.(*nodeproto.Heartbeat)
		if !ok || hb.Running == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no heartbeat showed the running request")
			}
			continue
		}
		if got, want := hb.Running, sim.Stats().Running; got != want {
			t.Errorf("heartbeat running = %d, simulator %d", got, want)
		}
		if got, want := hb.QueueDepth, 0; got != want {
			t.Errorf("heartbeat queue_depth = %d, want %d", got, want)
		}
		if hb.KVCacheUsage == nil || *hb.KVCacheUsage <= 0 {
			t.Errorf("heartbeat kv_cache_usage = %v, want a positive fraction", hb.KVCacheUsage)
		}
		if hb.GPUUtil != nil {
			t.Errorf("heartbeat gpu_util = %v, want absent", *hb.GPUUtil)
		}
		return
	}
}
