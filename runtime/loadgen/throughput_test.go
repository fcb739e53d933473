package loadgen_test

import (
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/registry"
)

// Closed-loop throughput: throughputWorkers clients per target, for
// throughputDuration per target, in throughputRounds rounds that visit the
// targets in turn (loadgen.ClosedLoop).
const (
	throughputWorkers  = 32
	throughputDuration = 10 * time.Second
	throughputRounds   = 5
	// throughputTimeScale runs the engine fast enough not to matter.
	throughputTimeScale = 1000
)

// BenchmarkThroughput measures completions per second through the whole
// platform (a key with every limit set, so each admission step runs:
// quotas on Redis, the ledger's reservation and settle on a PostgreSQL that
// syncs every commit to disk), through a bare httputil.ReverseProxy, and
// straight to the engine, in one run, closed loop, with an engine fast
// enough not to matter. The platform is measured with one team (every
// request on one team's balance row) and with four. The ratios
// platform/proxy are the figures loadgen.Goals sets.
//
// Each part runs in a process of its own, as deployed: the client, the
// engine, the proxy, the node agent, and this one with the gateway and the
// orchestrator; so the ratio does not charge the platform for the client's
// or the engine's CPU, nor the proxy for the platform's garbage.
func BenchmarkThroughput(b *testing.B) {
	engine := platformtest.StartNodeProcess(b, platformtest.NodeProcess{Model: overheadModel, TimeScale: throughputTimeScale})
	proxyURL := platformtest.StartProxyProcess(b, engine)
	var keys []string
	// The same engine is also a cloud node, which the orchestrator reaches
	// over HTTP as on EKS (most traffic): the cloud targets are the
	// platform without the WebSocket hop and the agent.
	platformURL, key := startPlatform(b, platformOpts{durable: true, teams: 4, keys: &keys,
		cloudClient: engineclient.NewEngineClient(),
		cloud: []orchestrator.CloudNode{{ID: "bench-cloud", URL: engine, Models: []registry.ModelSlot{{
			Name: cloudModel, ServedName: overheadModel, MaxNumSeqs: enginesim.DefaultMaxNumSeqs,
			MaxModelLen: enginesim.DefaultMaxModelLen, KVCapacityTokens: defaultKVTokens(b)}}}}},
		func(wsURL, token string) {
			platformtest.StartNodeProcess(b, platformtest.NodeProcess{Model: overheadModel, NodeID: "bench-node",
				ServerURL: wsURL, Token: token, EngineURL: engine, MaxNumSeqs: enginesim.DefaultMaxNumSeqs})
		})
	waitRoutable(b, platformURL, key, cloudModel)
	targets := []loadgen.ClosedTarget{
		{Target: loadgen.Target{Name: "direct", URL: engine, Model: overheadModel}},
		{Target: loadgen.Target{Name: "proxy", URL: proxyURL, Model: overheadModel}},
		{Target: loadgen.Target{Name: "platform", URL: platformURL, Key: key, Model: overheadModel}},
		{Target: loadgen.Target{Name: "platform-4-teams", URL: platformURL, Model: overheadModel}, Keys: keys},
		{Target: loadgen.Target{Name: "cloud", URL: platformURL, Key: key, Model: cloudModel}},
		{Target: loadgen.Target{Name: "cloud-4-teams", URL: platformURL, Model: cloudModel}, Keys: keys},
	}
	warm := overheadWarm([]loadgen.Target{targets[0].Target, targets[1].Target, targets[2].Target, targets[4].Target})
	b.ResetTimer()
	out := platformtest.RunClosedLoopProcess(b, platformtest.ClosedLoopRun{Warm: warm, Run: loadgen.ClosedLoopConfig{
		Targets: targets, Workers: throughputWorkers, Duration: throughputDuration, Rounds: throughputRounds}})
	b.StopTimer()
	checkWarm(b, out.Warm)
	rates := map[string]float64{}
	for _, r := range out.Run {
		if r.Failed > 0 {
			b.Errorf("%s: %d requests failed; first: %s", r.Name, r.Failed, r.FirstFailure)
		}
		rates[r.Name] = r.PerSecond(throughputDuration)
		b.Logf("%-16s %6.0f completions/s (%d in %v over %d rounds, %d workers)", r.Name, rates[r.Name], r.Answered,
			throughputDuration, throughputRounds, throughputWorkers)
		b.ReportMetric(rates[r.Name], r.Name+"-req/s")
	}
	if rates["proxy"] > 0 {
		b.ReportMetric(rates["platform"]/rates["proxy"], "platform/proxy")
		b.ReportMetric(rates["platform-4-teams"]/rates["proxy"], "4-teams/proxy")
		b.ReportMetric(rates["cloud"]/rates["proxy"], "cloud/proxy")
		b.ReportMetric(rates["cloud-4-teams"]/rates["proxy"], "cloud-4-teams/proxy")
	}
	b.ReportMetric(0, "ns/op")
}
