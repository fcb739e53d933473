package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/routing"
)

// TestKVCacheFull: more long answers at once than the engine's KV cache
// holds. Routed by request count alone (least-request, as a plain load
// balancer routes), they all start, the cache fills and the engine
// preempts (vllm:num_preemptions); the required mitigation, a cap on
// max_tokens per key, keeps the same load within the cache: no
// preemption. The platform's default router (kv-aware) counts each
// request's prompt and output cap against the node's free cache and
// holds back what does not fit, so the engine never preempts: the wait
// moves to the queue, and the cap shortens it. Every stream of every run
// is answered whole and billed.
func TestKVCacheFull(t *testing.T) {
	uncappedPreemptions := map[string]int64{}
	for _, policy := range []string{routing.LeastRequest, routing.KVAware} {
		t.Run(policy, func(t *testing.T) {
			n := size(t, 24, 64)
			const asked, capped = 1000, 150
			// An 8B on an L40S that leaves its KV cache about 12,000
			// tokens: n answers of 1,000 tokens need several times that,
			// n of 150 do not.
			dep, err := enginesim.Profile(enginesim.DefaultProfile)
			if err != nil {
				t.Fatal(err)
			}
			dep.GPUMemoryUtilization = 0.42
			p := platformtest.Start(t, platformtest.Options{StreamIdleTimeout: time.Hour, RedisTimeout: time.Minute, Policy: policy})
			p.Model(model, model)
			node := p.StartNode("node-1", model, enginesim.Config{Deployment: dep, ServedModelName: model, Seed: 1, TimeScale: 20,
				MeanAnswerTokens: 1_000_000}, 2*n)
			kv := node.Sim.Stats().KVBlocksTotal * 16
			team := p.Team("t", 1_000_000_000)
			free := p.Key(adminwire.CreateKeyRequest{TeamID: team, Name: "uncapped"})
			capKey := p.Key(adminwire.CreateKeyRequest{TeamID: team, Name: "capped", MaxTokens: capped})
			client := loadgen.NewClient()
			defer client.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()

			type result struct {
				preempted, tokens int64
				slowest           time.Duration // the slowest first token
			}
			run := func(key, tag string) (r result) {
				before := node.Sim.Stats().Preemptions
				for _, o := range openStreams(ctx, client, p.URL, key, tag, n, asked).wait() {
					if !o.whole() {
						t.Errorf("%s: a stream did not finish whole: %+v", tag, o)
					}
					r.tokens += o.completion
					r.slowest = max(r.slowest, o.ttft)
				}
				r.preempted = node.Sim.Stats().Preemptions - before
				return r
			}
			uncapped := run(free, "uncapped")
			capRun := run(capKey, "capped")
			if uncapped.tokens != int64(n*asked) || capRun.tokens != int64(n*capped) {
				t.Errorf("%d and %d tokens generated, want %d uncapped and %d capped", uncapped.tokens, capRun.tokens, n*asked, n*capped)
			}
			uncappedPreemptions[policy] = uncapped.preempted
			if capRun.preempted != 0 {
				t.Errorf("with max_tokens capped at %d per key: %d preemptions, want none", capped, capRun.preempted)
			}
			b := checkBooks(t, p)
			figure(t, "%s routing, %d streams at once asking %d tokens each on a %d-token KV cache: %d preemptions, slowest first token %v; the same on a key capped at max_tokens %d: %d preemptions, slowest first token %v; all answered whole (%d and %d tokens); books: %d settled, none reserved",
				policy, n, asked, kv, uncapped.preempted, uncapped.slowest.Round(time.Millisecond), capped, capRun.preempted,
				capRun.slowest.Round(time.Millisecond), uncapped.tokens, capRun.tokens, b.Settled)
		})
	}
	least, aware := uncappedPreemptions[routing.LeastRequest], uncappedPreemptions[routing.KVAware]
	if least == 0 {
		t.Errorf("answers of 1,000 tokens beyond the KV cache caused no preemption under least-request routing: the scenario shows nothing")
	}
	if aware != 0 {
		t.Errorf("the kv-aware router let the engine preempt %d times (least-request: %d): want none", aware, least)
	}
}
