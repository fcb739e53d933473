package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestHostileNodeIsBilledFromTheRelayedText is issue 40's probe on the
// node socket's path: a node agent with a valid token in front of an
// engine that answers 20 chunks with a usage of 2^62 tokens. The
// orchestrator and the gateway count what they relay, not what the node
// says: the row, the usage the client reads and the correction agree on
// the 20 tokens relayed.
func TestHostileNodeIsBilledFromTheRelayedText(t *testing.T) {
	const chunks = 20
	p := platformtest.Start(t, platformtest.Options{})
	p.Model("llama-8b", "llama-8b")
	reg := prometheus.NewRegistry()
	url := p.StartGateway(func(c *gateway.Config) { c.Metrics = gateway.NewMetrics(reg) })
	dep, err := enginesim.Profile("llama-8b")
	if err != nil {
		t.Fatal(err)
	}
	// The simulator answers the agent's health and load probes; the
	// chat completions are the hostile engine's.
	sim, _ := platformtest.ServeSim(t, enginesim.Config{Deployment: dep, ServedModelName: "llama-8b", MaxNumSeqs: 8, TimeScale: 200})
	evil := hostile{contents: repeat(" word", chunks), prompt: 12, completion: hugeTokens}
	engine := platformtest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			evil.ServeHTTP(w, r)
			return
		}
		sim.Handler().ServeHTTP(w, r)
	}))
	p.StartAgent(p.WSURL, "evil", "llama-8b", sim, engine)
	p.WaitNode("evil")
	team := p.Team("alpha", 100*credit)
	key := p.Key(adminwire.CreateKeyRequest{TeamID: team})
	for i, stream := range []bool{true, false} {
		var resp *http.Response
		var body string
		// The model is served once the orchestrators have seen the node.
		testenv.EventuallyNil(t, testenv.WaitFor, "an answer from the node", func() error {
			resp, body = postChat(t, url, key, usageBody("a secret prompt about llamas", stream, false, 4096))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d: %s", resp.StatusCode, body)
			}
			return nil
		})
		var r row
		testenv.EventuallyNil(t, testenv.WaitFor, "the row to settle", func() error {
			p.Settled()
			var from *string
			err := p.DB.QueryRowContext(context.Background(), `SELECT status::text, settled_from::text, prompt_tokens, completion_tokens
				FROM usage_ledger WHERE request_id = $1`, resp.Header.Get("X-Request-Id")).Scan(&r.status, &from, &r.prompt, &r.completion)
			if err == nil && r.status != "settled" {
				err = fmt.Errorf("row %s", r.status)
			}
			return err
		})
		if r.prompt != 12 || r.completion != chunks {
			t.Errorf("stream %v: row %+v; want 12 + %d tokens, what was relayed", stream, r, chunks)
		}
		if u := shownUsage(t, stream, body); u == nil || u.CompletionTokens != chunks || u.TotalTokens != 12+chunks {
			t.Errorf("stream %v: the client read usage %+v; want 12 + %d", stream, u, chunks)
		}
		if got := corrections(t, reg, "over_reported"); got != float64(i+1) {
			t.Errorf("stream %v: over_reported corrections counted %v, want %d", stream, got, i+1)
		}
	}
}

// postChat sends a chat completion to the gateway at url with key.
func postChat(t *testing.T, url, key, body string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}
