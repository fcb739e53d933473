package nodeagent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// metricsServer serves a testdata exposition at /metrics until the test
// ends.
func metricsServer(t *testing.T, file string) string {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
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
	t.Cleanup(srv.Close)
	return srv.URL
}

// ptr returns a pointer to v.
func ptr(v float64) *float64 { return &v }

// fixedGPU is a GPUQuery that prints out, or fails with err.
func fixedGPU(out string, err error) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) { return []byte(out), err }
}

func TestBeat(t *testing.T) {
	tests := []struct {
		name, file       string
		gpu              func(context.Context) ([]byte, error)
		draining         bool
		waiting, running int
		kv, gpuUtil      *float64 // nil: absent
	}{
		{"two models, two GPUs", "two_models.prom", fixedGPU("35\n65\n", nil), false, 7, 7, ptr(0.75), ptr(0.5)},
		{"no kv gauge, draining", "no_kv.prom", fixedGPU("100\n", nil), true, 0, 1, nil, ptr(1)},
		{"gpu query fails", "two_models.prom", fixedGPU("", errors.New("driver gone")), false, 7, 7, ptr(0.75), nil},
		{"gpu not reported", "two_models.prom", fixedGPU("[N/A]\n", nil), false, 7, 7, ptr(0.75), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(Config{ServerURL: "ws://orch.example/v1/nodes/connect", NodeID: "n1", Token: "t",
				EngineURL: metricsServer(t, tt.file), GPUQuery: tt.gpu,
				Models: []nodeproto.Model{{Name: testModel, ServedName: "m", MaxNumSeqs: 1, MaxModelLen: 2, KVCapacityTokens: 3}}})
			if err != nil {
				t.Fatal(err)
			}
			got := a.beat(t.Context(), tt.draining)
			if got.QueueDepth != tt.waiting || got.Running != tt.running {
				t.Errorf("queue_depth, running = %d, %d, want %d, %d", got.QueueDepth, got.Running, tt.waiting, tt.running)
			}
			if !sameFraction(got.KVCacheUsage, tt.kv) {
				t.Errorf("kv_cache_usage = %s, want %s", fraction(got.KVCacheUsage), fraction(tt.kv))
			}
			if !sameFraction(got.GPUUtil, tt.gpuUtil) {
				t.Errorf("gpu_util = %s, want %s", fraction(got.GPUUtil), fraction(tt.gpuUtil))
			}
			if got.Draining != tt.draining || len(got.Models) != 1 || got.Models[0] != testModel {
				t.Errorf("draining, models = %v, %v, want %v, [%s]", got.Draining, got.Models, tt.draining, testModel)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("beat is not a valid frame: %v", err)
			}
		})
	}
}

// sameFraction reports whether two optional fractions are both absent or
// equal.
func sameFraction(a, b *float64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// fraction prints an optional fraction.
func fraction(f *float64) string {
	if f == nil {
		return "absent"
	}
	return strconv.FormatFloat(*f, 'g', -1, 64)
}

func TestParseGPUUtil(t *testing.T) {
	tests := []struct {
		name, out string
		want      *float64
	}{
		{"one GPU", "42\n", ptr(0.42)},
		{"four GPUs", "0\n100\n50\n50\n", ptr(0.5)},
		{"no trailing newline, spaces", " 80 \n 20", ptr(0.5)},
		{"one not supported", "[N/A]\n60\n", ptr(0.6)},
		{"out of range clamped", "150\n", ptr(1)},
		{"nothing", "", nil},
		{"garbage", "No devices were found\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseGPUUtil([]byte(tt.out)); !sameFraction(got, tt.want) {
				t.Errorf("parseGPUUtil(%q) = %s, want %s", tt.out, fraction(got), fraction(tt.want))
			}
		})
	}
}

// TestGPUToolOnPath runs the default query against a stand-in for the
// driver's tool on the PATH, and reports none when the PATH has none.
func TestGPUToolOnPath(t *testing.T) {
	withTool := t.TempDir()
	script := "#!/bin/sh\n" +
		`[ "$1 $2" = "--query-gpu=utilization.gpu --format=csv,noheader,nounits" ] || exit 2` + "\n" +
		"printf '30\\n90\\n'\n"
	if err := os.WriteFile(filepath.Join(withTool, gpuTool), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       *float64
	}{
		{"present", withTool, ptr(0.6)},
		{"absent", t.TempDir(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			a, err := New(Config{ServerURL: "ws://orch.example/v1/nodes/connect", NodeID: "n1", Token: "t"})
			if err != nil {
				t.Fatal(err)
			}
			if got := a.gpuUtil(t.Context()); !sameFraction(got, tt.want) {
				t.Errorf("gpu_util = %s, want %s", fraction(got), fraction(tt.want))
			}
		})
	}
}

func TestHeartbeatReportsEngineLoad(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	startAgent(t, fs, eng)
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-h", testModel, sim.ServedModelName(), 3000))
	deadline := time.Now().Add(waitFor)
	for {
		hb, ok := sc.nextAny(t).(*nodeproto.Heartbeat)
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
