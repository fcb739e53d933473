package orchestrator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/frontdoor"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

// gatewayFor runs a gateway whose dispatcher is d and returns its base URL
// and an API key of a team with credit; c.adminToken opens its admin API.
func (c *cluster) gatewayFor(d dispatch.Dispatcher) (string, string) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	c.t.Cleanup(func() {
		cancel()
		if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			c.t.Errorf("gateway: %v", err)
		}
	})
	// The ledger and its sweeper as the gateway command wires and runs them.
	led, err := frontdoor.NewLedger(c.db, c.rdb, c.prefix, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	g.Go(func() error { return led.Run(gctx) })
	adm := admin.NewSQLStore(c.db)
	now := time.Now()
	if _, _, err := adm.PutModel(ctx, testModel, adminwire.ModelSpec{ServedName: testModel, PromptPriceMicroPerMTok: 200_000,
		CompletionPriceMicroPerMTok: 800_000, MaxContextTokens: 8192, MaxOutputTokens: 2048}, now); err != nil {
		c.t.Fatal(err)
	}
	team, _, err := adm.CreateTeam(ctx, "e2e", now)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := led.AddCredit(ctx, team.ID, "e2e-credit", 100_000_000, "test"); err != nil {
		c.t.Fatal(err)
	}
	key, err := adm.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team.ID, Name: "e2e", RPM: 600, TokensPerDay: 1_000_000, MaxStreams: 16}, "", now)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.adminToken, err = auth.GenerateAdminToken(); err != nil {
		c.t.Fatal(err)
	}
	front, err := frontdoor.Start(gctx, g, frontdoor.Config{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", DB: c.db, AdminToken: c.adminToken,
		Redis: c.rdb, RedisPrefix: c.prefix, Ledger: led, Dispatcher: d, URLGuard: &urlguard.Guard{AllowUnresolvable: true}})
	if err != nil {
		c.t.Fatal(err)
	}
	return front.Base, key.Secret
}

// sseAnswer is what a client read from a streamed chat completion.
type sseAnswer struct {
	requestID string
	content   int // content chunks
	usage     *openai.Usage
	errEvent  bool
	errEvents int
	done      bool
}

// chat streams one completion through the gateway.
func chat(t *testing.T, base, key string, maxTokens int) sseAnswer {
	t.Helper()
	body := `{"model":"` + testModel + `","stream":true,"stream_options":{"include_usage":true},"max_tokens":` +
		strconv.Itoa(maxTokens) + `,"messages":[{"role":"user","content":"Tell me about the sea."}]}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
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
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	a := sseAnswer{requestID: resp.Header.Get("X-Request-Id")}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			a.done = true
			break
		}
		if openai.StreamError([]byte(data)) != nil {
			a.errEvent = true
			a.errEvents++
			continue
		}
		var ch openai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("bad chunk %q: %v", data, err)
		}
		if ch.Usage != nil {
			u := *ch.Usage
			a.usage = &u
		}
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != nil && *ch.Choices[0].Delta.Content != "" {
			a.content++
		}
	}
	return a
}

// ledgerRow is a request's row in the usage ledger.
type ledgerRow struct {
	status, from       string
	prompt, completion int64
}

// settled waits for the request's ledger row to leave reserved.
func (c *cluster) settled(requestID string) ledgerRow {
	c.t.Helper()
	var r ledgerRow
	testenv.Eventually(c.t, "ledger row of "+requestID+" settled", func() bool {
		var from *string
		err := c.db.QueryRowContext(c.t.Context(), "SELECT status, settled_from, prompt_tokens, completion_tokens FROM usage_ledger WHERE request_id = $1",
			requestID).Scan(&r.status, &from, &r.prompt, &r.completion)
		if from != nil {
			r.from = *from
		}
		return err == nil && r.status != "reserved"
	})
	return r
}

// TestEndToEnd sends a client's stream through a gateway on replica A,
// over pub/sub to replica B that owns the node's socket, through the node
// agent to the simulator and back; the ledger settles the exact tokens.
func TestEndToEnd(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	n := c.startNode("node-1", b, nodeOpts{})
	c.waitNode(n.id, "orch-b")
	base, key := c.gatewayFor(a.o())

	got := chat(t, base, key, 300)
	if !got.done || got.usage == nil || got.errEvent {
		t.Fatalf("answer done=%v usage=%v error=%v; want a complete stream with usage", got.done, got.usage, got.errEvent)
	}
	row := c.settled(got.requestID)
	want := ledgerRow{status: "settled", from: "exact", prompt: got.usage.PromptTokens, completion: got.usage.CompletionTokens}
	if row != want {
		t.Errorf("ledger row %+v, want %+v", row, want)
	}
	if gen := n.sim.Stats().GenerationTokens; gen != row.completion {
		t.Errorf("engine generated %d tokens, ledger settled %d", gen, row.completion)
	}
}

// TestEndToEndEngineKilled kills the engine mid-stream: the client gets an
// error event and the end of the stream, and the ledger settles the
// partial tokens.
func TestEndToEndEngineKilled(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	n := c.startNode("node-1", b, nodeOpts{sim: enginesim.Config{TimeScale: 5, Faults: enginesim.Faults{DieAfterTokens: 40}}})
	c.waitNode(n.id, "orch-b")
	base, key := c.gatewayFor(a.o())

	got := chat(t, base, key, 400)
	if got.errEvents != 1 || !got.done {
		t.Errorf("%d error events, [DONE] %v after the engine died; want one error event, then [DONE]", got.errEvents, got.done)
	}
	row := c.settled(got.requestID)
	if row.status != "settled" || row.from != "partial" || row.completion < 1 || row.completion > 40 {
		t.Errorf("ledger row %+v; want settled from partial with 1..40 completion tokens", row)
	}
}

// TestDrainThroughAdminAPI drains a node with POST /admin/nodes/{id}/drain
// on a gateway whose process owns no socket: 202, the node takes no new
// work, and its agent exits.
func TestDrainThroughAdminAPI(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	n := c.startNode("node-1", b, nodeOpts{})
	c.waitNode(n.id, "orch-b")
	base, _ := c.gatewayFor(a.o())

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/admin/nodes/"+n.id+"/drain", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("drain answered %d, want 202", resp.StatusCode)
	}
	select {
	case err := <-n.agentRun:
		n.agentRun <- err
	case <-time.After(testenv.WaitFor):
		t.Fatal("the agent did not exit after the drain")
	}
	var state string
	testenv.Eventually(c.t, "the node is drained", func() bool {
		err := c.db.QueryRowContext(t.Context(), "SELECT state FROM nodes WHERE id = $1", n.id).Scan(&state)
		return err == nil && state == "drained"
	})
}
