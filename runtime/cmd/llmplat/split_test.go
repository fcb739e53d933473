package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// startCommand runs one subcommand until the test ends and returns what
// it printed once want appears in it.
func startCommand(t *testing.T, name string, run func(context.Context, []string, io.Writer) error, args []string, want string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s returned %v", name, err)
		}
	})
	testenv.EventuallyNil(t, commandWait, fmt.Sprintf("%s to print %q", name, want), func() error {
		select {
		case err := <-done:
			done <- err // for the cleanup's wait
			t.Fatalf("%s exited: %v\n%s", name, err, out.String())
		default:
		}
		if printed := out.String(); !strings.Contains(printed, want) {
			return fmt.Errorf("it printed %q", printed)
		}
		return nil
	})
	return out.String()
}

// field returns the word after label in s.
func field(s, label string) string {
	_, rest, _ := strings.Cut(s, label)
	word, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
	return strings.TrimSuffix(strings.TrimSpace(word), ",")
}

// TestSplitDeployment runs the platform as production does, as separate
// commands on real PostgreSQL and Redis: `llmplat orchestrator`, a
// `llmplat nodeagent` beside a simulated engine that dials it, and
// `llmplat gateway -orchestrator` that dispatches over internal HTTP. The
// admin API shows the node live, and a key streams a completion.
func TestSplitDeployment(t *testing.T) {
	dsn, rds := testenv.Postgres(t), testenv.Redis(t)
	db, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	issued, err := admin.NewSQLNodeTokens(db).Issue(t.Context(), "node-1", "split-node-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const adminToken = "llpadm_0123456789abcdefghijABCDEFGHIJ0123456789abc"
	t.Setenv("LLMPLAT_ADMIN_TOKEN", adminToken)
	t.Setenv(internalTokenEnv, "internal-secret-of-32-characters-at-least")
	t.Setenv(nodeTokenEnv, issued.Token)

	sim, eng := startEngine(t)

	stores := []string{"-database-url", dsn, "-redis-url", rds.URL, "-redis-prefix", rds.Prefix}
	orch := startCommand(t, "orchestrator", runOrchestrator, append([]string{"-id", "orch-1", "-addr", "127.0.0.1:0",
		"-internal-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0"}, stores...), "metrics on")
	nodes, internal := field(orch, "nodes on"), field(orch, "internal dispatch on")
	startCommand(t, "nodeagent", runNodeAgent, []string{"-server", "ws://" + nodes + "/v1/nodes/connect", "-node-id", "node-1",
		"-engine", eng.URL, "-model", "name=llama-8b,served=llama-8b,max-num-seqs=64,max-model-len=8192,kv-tokens=185000"}, "")
	gw := startCommand(t, "gateway", runGateway, append([]string{"-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0",
		"-orchestrator", "http://" + internal}, stores...), "serving ")
	base := field(gw, "serving")

	ctx := t.Context()
	cl, err := adminclient.NewClient(base, adminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNil(t, commandWait, "node-1 live and healthy in GET /admin/nodes", func() error {
		list, err := cl.ListNodes(ctx)
		if err == nil && (len(list.Data) != 1 || list.Data[0].Live == nil || !list.Data[0].Live.Healthy) {
			err = fmt.Errorf("nodes %+v", list.Data)
		}
		return err
	})
	key := bootstrapKey(ctx, t, cl)
	// The orchestrator's snapshot takes up to a second to show the node;
	// meanwhile the request waits in the model's queue.
	status, body, tokens := complete(ctx, t, base, key)
	if status != 200 || tokens == 0 {
		t.Fatalf("completion through the orchestrator: %d %s", status, body)
	}
	if got := sim.Stats().GenerationTokens; got != tokens {
		t.Errorf("the engine generated %d tokens, the client was told %d", got, tokens)
	}
	// The web console is served by the split deployment's gateway on
	// PostgreSQL and Redis: the team's key signs in and, once the
	// completion's settle (which runs after the answer) is in, sees the
	// model it used; the admin token sees the node.
	console, _ := platformtest.ConsoleSignIn(t, base+"/console", key, "/console/usage")
	testenv.Eventually(t, "the console's usage page to name llama-8b after a completion", func() bool {
		resp, err := console.Get(base + "/console/usage")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		page, err := io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK && strings.Contains(string(page), "llama-8b")
	})
	if _, page := platformtest.ConsoleSignIn(t, base+"/console", adminToken, "/console/platform/nodes"); !strings.Contains(page, "node-1") {
		t.Errorf("the console's nodes page names no node-1:\n%s", page)
	}
	http.DefaultClient.CloseIdleConnections()
}

// bootstrapKey declares the llama-8b model and a team with credit through
// the admin API, and returns a new API key of the team.
func bootstrapKey(ctx context.Context, t *testing.T, cl *adminclient.Client) string {
	t.Helper()
	if _, _, err := cl.PutModel(ctx, "llama-8b", adminwire.ModelSpec{ServedName: "llama-8b", PromptPriceMicroPerMTok: 100_000,
		CompletionPriceMicroPerMTok: 500_000, MaxContextTokens: 8192, MaxOutputTokens: 4096}); err != nil {
		t.Fatal(err)
	}
	team, _, err := cl.CreateTeam(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AddCredit(ctx, adminwire.CreditRequest{TeamID: team.ID, AmountMicrocredits: 5_000_000, IdempotencyKey: "g1"}); err != nil {
		t.Fatal(err)
	}
	key, err := cl.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team.ID, Name: "ci"}, "")
	if err != nil {
		t.Fatal(err)
	}
	return key.Secret
}

// complete asks for a short non-streamed completion and returns the
// status, the body and the completion tokens of its usage.
func complete(ctx context.Context, t *testing.T, base, key string) (int, []byte, int64) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(
		`{"model":"llama-8b","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got struct {
		Usage struct {
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	_ = json.Unmarshal(body, &got)
	return resp.StatusCode, body, got.Usage.CompletionTokens
}

// TestOrchestratorFailsFastWhenAPortIsTaken: when one of its addresses is
// taken, `llmplat orchestrator` returns the listen error, the servers it
// had already started closed, instead of serving on with a part missing.
func TestOrchestratorFailsFastWhenAPortIsTaken(t *testing.T) {
	dsn, rds := testenv.Postgres(t), testenv.Redis(t)
	t.Setenv(internalTokenEnv, "internal-secret-of-32-characters-at-least")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	done := make(chan error, 1)
	go func() {
		done <- runOrchestrator(t.Context(), []string{"-id", "orch-1", "-addr", "127.0.0.1:0", "-internal-addr", taken.Addr().String(),
			"-metrics-addr", "127.0.0.1:0", "-database-url", dsn, "-redis-url", rds.URL, "-redis-prefix", rds.Prefix}, io.Discard)
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), taken.Addr().String()) {
			t.Fatalf("runOrchestrator = %v, want the listen error for %s", err, taken.Addr())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("runOrchestrator did not return after its internal address was taken")
	}
}
