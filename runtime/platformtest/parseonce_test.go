//go:build parsecount

package platformtest_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/internalhop"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/registry"
)

// TestEachEventParsedOnce counts the platform's readings of engine events
// (engineclient.ParseEvent, counted in a build with the parsecount tag)
// while one streamed request runs on each path: a node's socket and a
// cloud engine, with the gateway and the orchestrator in one process and
// apart (the internal hop). Each event the engine sent is parsed once: the
// client, which asked for the usage, receives every one of them, so the
// count must equal the events it received. The node agent's own reading
// (engineclient.Classify) is not the platform's and is not counted.
//
// Run it with: go test -tags parsecount -run TestEachEventParsedOnce ./runtime/platformtest/
func TestEachEventParsedOnce(t *testing.T) {
	if engineclient.Parses() < 0 {
		t.Fatal("this build does not count parses: run it with -tags parsecount")
	}
	for _, apart := range []bool{false, true} {
		name := map[bool]string{false: "in process", true: "over the internal hop"}[apart]
		t.Run(name, func(t *testing.T) {
			p := start(t, apart)
			key := p.Key(adminwire.CreateKeyRequest{TeamID: p.Team("parse-once", 1e12), Name: "k"})
			for _, model := range []string{"sock", "cloud"} {
				before := engineclient.Parses()
				events := streamWithUsage(t, p.URL, key, model)
				if parsed := engineclient.Parses() - before; parsed != int64(events) || events < 3 {
					t.Errorf("%s: %d events reached the client, %d parses: want one parse per event", model, events, parsed)
				}
			}
		})
	}
}

// start runs a platform whose model "sock" has a node on a socket and
// "cloud" a cloud engine; apart puts the internal hop between the
// gateway and the orchestrator.
func start(t *testing.T, apart bool) *platformtest.Platform {
	cfg := enginesim.Config{ServedModelName: "sim", Seed: 1, MeanAnswerTokens: 5}
	cloud, cloudURL := platformtest.ServeSim(t, cfg)
	opts := platformtest.Options{Cloud: []orchestrator.CloudNode{{ID: "cloud-1", URL: cloudURL,
		Models: []registry.ModelSlot{{Name: "cloud", ServedName: "sim", MaxNumSeqs: cloud.MaxNumSeqs(),
			MaxModelLen: int(cloud.MaxModelLen()), KVCapacityTokens: cloud.Stats().KVBlocksTotal * 16}}}}}
	var p *platformtest.Platform
	if apart {
		orch := dispatcherFunc(func(ctx context.Context, j *dispatch.Job) (dispatch.Stream, error) {
			return p.Orchestrator().Dispatch(ctx, j)
		})
		hop := httptest.NewServer(internalhop.NewRemoteHandler(orch, "internal", nil))
		t.Cleanup(hop.Close)
		opts.Gateway = func(cfg *gateway.Config) { cfg.Dispatcher = internalhop.NewRemote(hop.URL, "internal", nil) }
	}
	p = platformtest.Start(t, opts)
	p.Model("sock", "sim")
	p.Model("cloud", "sim")
	p.StartNode("node-1", "sock", cfg, 8)
	return p
}

type dispatcherFunc func(context.Context, *dispatch.Job) (dispatch.Stream, error)

func (f dispatcherFunc) Dispatch(ctx context.Context, j *dispatch.Job) (dispatch.Stream, error) {
	return f(ctx, j)
}

// streamWithUsage streams a short completion of model, asking for the
// usage, and returns how many events (but [DONE]) the client received.
func streamWithUsage(t *testing.T, base, key, model string) int {
	t.Helper()
	body := `{"model":"` + model + `","stream":true,"stream_options":{"include_usage":true},"max_tokens":6,` +
		`"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v: %s", model, resp.StatusCode, err, raw)
	}
	if !bytes.HasSuffix(bytes.TrimSpace(raw), []byte("data: [DONE]")) {
		t.Fatalf("%s: the answer did not end: %s", model, raw)
	}
	return bytes.Count(raw, []byte("data: {"))
}
