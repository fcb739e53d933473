package loadgen_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/loadgen"
)

// heldStreams is the mission's 10× the seed's peak.
const heldStreams = 2000

// BenchmarkStreamMemory holds 2,000 streams open at once, first straight
// to the engine and then through the whole platform (gateway, orchestrator
// in process, WebSocket, node agent), and reports what the platform holds
// per open stream: the live heap and goroutine stacks of the process with
// the platform's streams open, less the same with the direct streams open
// (the client's and the engine's share, the same in both). The engine
// stalls every stream after its first token (StallAfterTokens), so the
// streams stay open without tokens flowing; the node declares room for
// them all. Every stream must open: the platform serves 2,000 at once
// without an error.
func BenchmarkStreamMemory(b *testing.B) {
	sim, engine := serveTimedSim(b, enginesim.Config{ServedModelName: overheadModel, Seed: 1,
		MaxNumSeqs: 2 * heldStreams, Faults: enginesim.Faults{StallAfterTokens: 1}})
	platformURL, key := startPlatform(b, sim, engine.url, platformOpts{maxNumSeqs: 2 * heldStreams, streamIdleTimeout: time.Hour})
	client := loadgen.NewClient()
	defer client.CloseIdleConnections()
	hold := func(t loadgen.Target) (live uint64, goroutines int) {
		b.Helper()
		h := loadgen.Hold(b.Context(), client, t, heldStreams, "Tell me about the sea.", 16)
		defer func() {
			h.Close()
			deadline := time.Now().Add(30 * time.Second)
			for st := sim.Stats(); st.Running+st.Waiting > 0; st = sim.Stats() {
				if time.Now().After(deadline) {
					b.Fatalf("the engine still runs %d sequences after the streams closed", st.Running+st.Waiting)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		if h.Opened != heldStreams {
			b.Fatalf("%s: %d of %d streams opened, %d failed; first: %s", t.Name, h.Opened, heldStreams, h.Errors, h.FirstError)
		}
		return liveBytes()
	}
	base, baseG := liveBytes()
	b.ResetTimer()
	direct, directG := hold(loadgen.Target{Name: "direct", URL: engine.url, Model: overheadModel})
	platform, platformG := hold(loadgen.Target{Name: "platform", URL: platformURL, Key: key, Model: overheadModel})
	b.StopTimer()
	perStream := func(x, y uint64) float64 { return (float64(x) - float64(y)) / heldStreams }
	b.Logf("live: at rest %d KiB, %d direct streams %d KiB, %d platform streams %d KiB; goroutines %d, %d, %d",
		base>>10, heldStreams, direct>>10, heldStreams, platform>>10, baseG, directG, platformG)
	b.ReportMetric(perStream(platform, direct)/1024, "platform-KiB/stream")
	b.ReportMetric(float64(platformG-directG)/heldStreams, "platform-goroutines/stream")
	b.ReportMetric(perStream(direct, base)/1024, "direct-KiB/stream")
	b.ReportMetric(0, "ns/op")
}

// liveBytes returns the live heap and goroutine stacks after a full
// collection, and the goroutine count.
func liveBytes() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse, runtime.NumGoroutine()
}
