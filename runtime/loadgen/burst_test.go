package loadgen_test

import (
	"testing"

	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// burstStreams is the reference workload's peak, arriving at once from one team.
const burstStreams = 200

// BenchmarkBurst measures time to first token when 200 streams from one
// team arrive at once (a big team's morning), through a bare
// httputil.ReverseProxy and through the whole platform (one key, its
// reservations on a durable PostgreSQL), each burst alone against the same
// engine. The ratio platform/proxy at p50 and p99 is the figure to watch:
// the mission's goal is at most 2.
func BenchmarkBurst(b *testing.B) {
	// The engine 20 times faster than an L40S: its own queueing would
	// otherwise hide what the paths add.
	sim, engine := platformtest.ServeSim(b, enginesim.Config{ServedModelName: overheadModel, Seed: 1, TimeScale: 20})
	proxyURL := serveProxy(b, engine)
	platformURL, key := startPlatform(b, platformOpts{durable: true}, localNode(b, sim, engine, enginesim.DefaultMaxNumSeqs))
	client := loadgen.NewClient()
	defer client.CloseIdleConnections()
	warm(b, client, []loadgen.Target{{Name: "proxy", URL: proxyURL, Model: overheadModel},
		{Name: "platform", URL: platformURL, Key: key, Model: overheadModel}})
	b.ResetTimer()
	p := map[string]loadgen.Percentiles{}
	for _, t := range []struct{ name, url, key string }{{"proxy", proxyURL, ""}, {"platform", platformURL, key}} {
		rep, err := loadgen.Load(b.Context(), loadgen.Plan{BaseURL: t.url, Key: t.key,
			Models: []loadgen.Weighted{{Model: overheadModel, Weight: 1}}, Burst: burstStreams,
			PromptTokens: 200, MaxTokens: 20, Client: client, Seed: 7})
		if err != nil {
			b.Fatal(err)
		}
		if o := rep.Overall; o.OK != burstStreams {
			b.Errorf("%s: %d of %d streams answered; errors %v", t.name, o.OK, burstStreams, o.Errors)
		}
		p[t.name] = rep.Overall.TTFT
		b.Logf("%-8s burst of %d: TTFT p50 %.0f ms, p99 %.0f ms", t.name, burstStreams, rep.Overall.TTFT.P50, rep.Overall.TTFT.P99)
	}
	b.StopTimer()
	b.ReportMetric(p["proxy"].P99, "proxy-ttft-p99-ms")
	b.ReportMetric(p["platform"].P99, "platform-ttft-p99-ms")
	if p["proxy"].P50 > 0 && p["proxy"].P99 > 0 {
		b.ReportMetric(p["platform"].P50/p["proxy"].P50, "p50-ratio")
		b.ReportMetric(p["platform"].P99/p["proxy"].P99, "p99-ratio")
	}
	b.ReportMetric(0, "ns/op")
}
