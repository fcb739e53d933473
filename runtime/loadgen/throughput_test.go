package loadgen_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/registry"
)

// Closed-loop throughput: throughputWorkers clients each send a 1-token,
// non-streamed completion, wait for the answer and send the next, for
// throughputDuration per path, in throughputRounds rounds that visit the
// paths in turn: the machine's speed drifts over a run (other tenants of
// its host), and rounds spread each path over the whole run, so the
// ratios compare paths measured under the same conditions.
const (
	throughputWorkers  = 32
	throughputDuration = 10 * time.Second
	throughputRounds   = 5
)

// BenchmarkThroughput measures completions per second through the whole
// platform (a key with every limit set, so each admission step runs:
// quotas on Redis, the ledger's reservation and settle on a PostgreSQL that
// syncs every commit to disk), through a bare httputil.ReverseProxy, and
// straight to the engine, in one run, closed loop, with an engine fast
// enough not to matter. The platform is measured with one team (every
// request on one team's balance row) and with four. The ratios
// platform/proxy are the figures the mission sets (at least 1/4).
func BenchmarkThroughput(b *testing.B) {
	sim, engine := platformtest.ServeSim(b, enginesim.Config{ServedModelName: overheadModel, Seed: 1, TimeScale: 1000})
	proxyURL := serveProxy(b, engine)
	var keys []string
	// The same engine is also a cloud node, which the orchestrator reaches
	// over HTTP as on EKS (most traffic): the cloud targets are the
	// platform without the WebSocket hop and the agent.
	platformURL, key := startPlatform(b, platformOpts{durable: true, teams: 4, keys: &keys,
		cloudClient: dispatch.NewEngineClient(),
		cloud: []orchestrator.CloudNode{{ID: "bench-cloud", URL: engine, Models: []registry.ModelSlot{{
			Name: cloudModel, ServedName: overheadModel, MaxNumSeqs: enginesim.DefaultMaxNumSeqs,
			MaxModelLen: enginesim.DefaultMaxModelLen, KVCapacityTokens: sim.Stats().KVBlocksTotal * 16}}}}},
		localNode(b, sim, engine, enginesim.DefaultMaxNumSeqs))
	waitRoutable(b, platformURL, key, cloudModel)
	client := loadgen.NewClient()
	defer client.CloseIdleConnections()
	type target struct {
		loadgen.Target
		keys []string // one per worker in turn; none: Target.Key
	}
	targets := []target{
		{Target: loadgen.Target{Name: "direct", URL: engine, Model: overheadModel}},
		{Target: loadgen.Target{Name: "proxy", URL: proxyURL, Model: overheadModel}},
		{Target: loadgen.Target{Name: "platform", URL: platformURL, Key: key, Model: overheadModel}},
		{Target: loadgen.Target{Name: "platform-4-teams", URL: platformURL, Model: overheadModel}, keys: keys},
		{Target: loadgen.Target{Name: "cloud", URL: platformURL, Key: key, Model: cloudModel}},
		{Target: loadgen.Target{Name: "cloud-4-teams", URL: platformURL, Model: cloudModel}, keys: keys},
	}
	warm(b, client, []loadgen.Target{targets[0].Target, targets[1].Target, targets[2].Target, targets[4].Target})
	b.ResetTimer()
	answered := map[string]int64{}
	slice := throughputDuration / throughputRounds
	for range throughputRounds {
		for _, t := range targets {
			n, errs, first := closedLoop(b.Context(), client, t.Target, t.keys, throughputWorkers, slice)
			if errs > 0 {
				b.Errorf("%s: %d requests failed; first: %s", t.Name, errs, first)
			}
			answered[t.Name] += n
		}
	}
	rates := map[string]float64{}
	for _, t := range targets {
		rates[t.Name] = float64(answered[t.Name]) / throughputDuration.Seconds()
		b.Logf("%-16s %6.0f completions/s (%d in %v over %d rounds, %d workers)", t.Name, rates[t.Name], answered[t.Name],
			throughputDuration, throughputRounds, throughputWorkers)
		b.ReportMetric(rates[t.Name], t.Name+"-req/s")
	}
	b.StopTimer()
	if rates["proxy"] > 0 {
		b.ReportMetric(rates["platform"]/rates["proxy"], "platform/proxy")
		b.ReportMetric(rates["platform-4-teams"]/rates["proxy"], "4-teams/proxy")
		b.ReportMetric(rates["cloud"]/rates["proxy"], "cloud/proxy")
		b.ReportMetric(rates["cloud-4-teams"]/rates["proxy"], "cloud-4-teams/proxy")
	}
	b.ReportMetric(0, "ns/op")
}

// closedLoop runs workers that each send the next request when the last
// is answered, until d passes, worker w with keys[w % len(keys)] when keys
// are given; it returns the answers, the failures and the first failure.
func closedLoop(ctx context.Context, client *http.Client, t loadgen.Target, keys []string, workers int, d time.Duration) (int64, int64, string) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	body := []byte(fmt.Sprintf(`{"model":%q,"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, t.Model))
	var ok, failed atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for w := range workers {
		key := t.Key
		if len(keys) > 0 {
			key = keys[w%len(keys)]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, t.URL+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if key != "" {
					req.Header.Set("Authorization", "Bearer "+key)
				}
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
						first.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					first.CompareAndSwap(nil, resp.Status)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	f, _ := first.Load().(string)
	return ok.Load(), failed.Load(), f
}
