package enginesim

import (
	"context"
	"testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestClientDisconnectFreesKV cancels one of three running streams: the
// running gauge and the KV usage drop at once, before any further step,
// and the request counts as aborted.
func TestClientDisconnectFreesKV(t *testing.T) {
	s := newTestSim(t, testConfig())
	srv := serve(t, s)
	const running = "vllm:num_requests_running{"
	const kvUsage = "vllm:kv_cache_usage_perc{"
	contexts := []string{"short question", "a somewhat longer question about caches", "a third question"}
	cancels := make([]context.CancelFunc, len(contexts))
	for i, text := range contexts {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		defer cancel()
		resp := post(ctx, t, srv.URL, chatBody(t, s, text, map[string]any{"stream": true, "max_tokens": 100}))
		defer resp.Body.Close()
	}
	testenv.Eventually(t, "three queued requests", func() bool { return s.Stats().Waiting == 3 })
	for range 5 {
		s.Step(context.Background())
	}
	before := s.Stats()
	if before.Running != 3 || scrape(t, srv.URL, running) != 3 {
		t.Fatalf("running = %d before the disconnect, want 3", before.Running)
	}
	kvBefore := scrape(t, srv.URL, kvUsage)

	cancels[1]()
	testenv.Eventually(t, "the running gauge to drop", func() bool { return scrape(t, srv.URL, running) == 2 })

	after := s.Stats()
	if after.Steps != before.Steps {
		t.Fatalf("engine stepped (%d → %d steps); the drop must not wait for a step", before.Steps, after.Steps)
	}
	kvAfter := scrape(t, srv.URL, kvUsage)
	if want := float64(after.KVBlocksUsed) / float64(after.KVBlocksTotal); kvAfter >= kvBefore || kvAfter != want {
		t.Errorf("kv_cache_usage_perc %v → %v, want a drop to %v", kvBefore, kvAfter, want)
	}
	if after.KVBlocksUsed >= before.KVBlocksUsed {
		t.Errorf("KV blocks used %d → %d, want fewer", before.KVBlocksUsed, after.KVBlocksUsed)
	}
	if got := scrape(t, srv.URL, `vllm:request_success_total{engine="0",finished_reason="abort"`); got != 1 {
		t.Errorf("aborted requests = %v, want 1", got)
	}
	// The other two keep going.
	if _, ok := s.Step(context.Background()); !ok || s.Stats().Running != 2 {
		t.Errorf("after the disconnect the engine runs %d sequences, want 2", s.Stats().Running)
	}
}

// TestDisconnectWhileWaiting aborts a request that never got into the
// batch: it leaves the waiting queue at once.
func TestDisconnectWhileWaiting(t *testing.T) {
	s := newTestSim(t, testConfig())
	srv := serve(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := post(ctx, t, srv.URL, chatBody(t, s, "hello", map[string]any{"stream": true}))
	defer resp.Body.Close()
	testenv.Eventually(t, "the request to queue", func() bool { return s.Stats().Waiting == 1 })
	cancel()
	testenv.Eventually(t, "the waiting gauge to drop", func() bool {
		return scrape(t, srv.URL, "vllm:num_requests_waiting{") == 0
	})
	if st := s.Stats(); st.Aborted != 1 || st.KVBlocksUsed != 0 {
		t.Errorf("stats %+v, want one abort and no KV in use", st)
	}
}
