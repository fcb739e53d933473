package devmode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"
	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// devRun is one running local mode, as its printed lines describe it.
type devRun struct {
	baseURL, key, adminToken, nodeURL string
	consoleURL                        string
	// metricsURL is the printed /metrics URL.
	metricsURL string
	// stop cancels the run and checks it ended cleanly; it runs once, at
	// the latest at the test's cleanup.
	stop func()
}

// startDev runs the local mode and returns the printed base URL and key.
func startDev(t *testing.T) (baseURL, key, adminToken string) {
	t.Helper()
	r := startDevOn(t, "")
	return r.baseURL, r.key, r.adminToken
}

// devStartWait bounds local mode's start: it migrates an embedded
// database and starts every part, seconds alone and more on a loaded
// machine.
const devStartWait = 60 * time.Second

// startDevOn runs the local mode on dataDir (empty: a temporary one) and
// waits for its printed lines.
func startDevOn(t *testing.T, dataDir string) *devRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, logs := &testenv.Buffer{}, &testenv.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})) // as llmplat dev logs
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", DataDir: dataDir, TimeScale: 50, Stdout: out, Logger: logger})
	}()
	r := &devRun{}
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			before := len(logs.String())
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v, want nil after cancel", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Run did not return after cancel")
			}
			// Ctrl-C is the normal way out: it releases the node records and
			// warns of nothing (the embedded Redis outlives its users).
			if stopping := logs.String()[before:]; stopping != "" {
				t.Errorf("stopping logged:\n%s", stopping)
			}
		})
	}
	t.Cleanup(r.stop)
	testenv.EventuallyNil(t, devStartWait, "local mode to print its credentials and addresses", func() error {
		select {
		case err := <-done:
			done <- err // for stop, at the cleanup
			t.Fatalf("local mode exited before printing its credentials: %v\n%s", err, out.String())
		default:
		}
		printed := out.String()
		for _, l := range strings.Split(printed, "\n") {
			if v, found := strings.CutPrefix(l, "OPENAI_BASE_URL="); found {
				r.baseURL = v
			}
			if v, found := strings.CutPrefix(l, "OPENAI_API_KEY="); found {
				r.key = v
			}
			if v, found := strings.CutPrefix(l, "LLMPLAT_ADMIN_TOKEN="); found {
				r.adminToken = v
			}
			if v, found := strings.CutPrefix(l, consoleLine); found {
				r.consoleURL, _, _ = strings.Cut(v, " ")
			}
			if v, found := strings.CutPrefix(l, nodeSocketLine); found {
				r.nodeURL, _, _ = strings.Cut(v, " ")
			}
			if _, v, found := strings.Cut(l, ", metrics "); found {
				r.metricsURL, _, _ = strings.Cut(v, ", ")
			}
		}
		if r.baseURL == "" || r.key == "" || r.adminToken == "" || r.nodeURL == "" || r.consoleURL == "" || r.metricsURL == "" {
			return fmt.Errorf("it printed:\n%s", printed)
		}
		return nil
	})
	return r
}

// TestLocalModeStreams is the README's promise: the printed lines work with
// the official OpenAI Go client, which streams from the 8B model and reads
// the usage.
func TestLocalModeStreams(t *testing.T) {
	baseURL, key, _ := startDev(t)
	if !strings.HasPrefix(key, "llp_") {
		t.Errorf("key %q lacks the llp_ prefix", key)
	}
	client := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey(key))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "llama-8b",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
		MaxTokens:     openai.Int(20),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" {
		t.Fatalf("no content streamed: %+v", acc.Choices)
	}
	if acc.Usage.CompletionTokens < 1 || acc.Usage.CompletionTokens > 20 || acc.Usage.PromptTokens < 1 {
		t.Errorf("usage = %+v, want 1..20 completion tokens and a prompt count", acc.Usage)
	}
	models, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	if strings.Join(ids, ",") != "llama-70b,llama-8b,qwen-32b" {
		t.Errorf("models = %v, want the reference workload's three", ids)
	}
}

// TestLocalModeEnforcesKeysAndOpensAdmin: the local mode runs the real
// admission path: no key is a 401, and the printed admin token opens /admin.
func TestLocalModeEnforcesKeysAndOpensAdmin(t *testing.T) {
	baseURL, _, adminToken := startDev(t)
	resp, err := http.Post(baseURL+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"llama-8b","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: status %d, want 401", resp.StatusCode)
	}

	// The nodes view lists one node agent per engine, live and healthy.
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(baseURL, "/v1")+"/admin/nodes", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var nodes adminwire.NodeList
	err = json.NewDecoder(resp.Body).Decode(&nodes)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /admin/nodes: status %d, %v", resp.StatusCode, err)
	}
	if len(nodes.Data) != len(DefaultModels) {
		t.Fatalf("GET /admin/nodes lists %d nodes, want one per model (%d)", len(nodes.Data), len(DefaultModels))
	}
	for _, n := range nodes.Data {
		if n.Live == nil || !n.Live.Healthy || n.Live.Owner != replicaID {
			t.Errorf("node %s: live %+v, want healthy and owned by %s", n.ID, n.Live, replicaID)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestLocalModeFailsFastWhenItsPortIsTaken: a second `make run`, or
// anything else on the gateway's port, ends the local mode with the
// listen error, its parts stopped, rather than leaving them running
// against closed clients until someone presses Ctrl-C.
func TestLocalModeFailsFastWhenItsPortIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	logs := &testenv.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Config{Addr: taken.Addr().String(), MetricsAddr: "127.0.0.1:0", TimeScale: 50, Logger: logger})
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("Run = %v, want the listen error", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after its gateway could not listen")
	}
	if l := logs.String(); l != "" {
		t.Errorf("stopping after the failed start logged:\n%s", l)
	}
}

// TestLocalModeRestartsOnItsDataDir: a restart on the same data dir starts,
// keeps what the admin API (Terraform) changed in a model it had declared,
// reconnects its node agents with working tokens and prints the same
// credentials; the printed node socket takes a node added by hand with a
// token issued through the admin API.
func TestLocalModeRestartsOnItsDataDir(t *testing.T) {
	dir := t.TempDir()
	first := startDevOn(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := adminClient(t, first)
	m, err := adm.GetModel(ctx, "llama-8b")
	if err != nil {
		t.Fatal(err)
	}
	changed := m.ModelSpec
	changed.PromptPriceMicroPerMTok++
	changed.MaxOutputTokens--
	if _, created, err := adm.PutModel(ctx, "llama-8b", changed); err != nil || created {
		t.Fatalf("PUT the model as Terraform would: created %v, %v", created, err)
	}
	first.stop()
	if fi, err := os.Stat(filepath.Join(dir, secretsFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kept secrets: %v, %v; want a file of mode 0600", fi, err)
	}

	second := startDevOn(t, dir)
	if second.key != first.key || second.adminToken != first.adminToken {
		t.Errorf("a restart printed other credentials: key %v, admin token %v",
			second.key == first.key, second.adminToken == first.adminToken)
	}
	adm = adminClient(t, second)
	if m, err := adm.GetModel(ctx, "llama-8b"); err != nil || m.ModelSpec != changed {
		t.Errorf("after a restart the model is %+v (%v), want the admin API's %+v", m.ModelSpec, err, changed)
	}
	waitNodesLive(ctx, t, adm, len(DefaultModels))

	// The restarted platform serves with the printed key.
	client := openai.NewClient(option.WithBaseURL(second.baseURL), option.WithAPIKey(second.key))
	if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:     "llama-8b",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
		MaxTokens: openai.Int(5),
	}); err != nil {
		t.Fatalf("completion after a restart: %v", err)
	}

	// A node added by hand on the printed socket, as an on-prem node would.
	issued, err := adm.IssueNodeToken(ctx, "onprem-1", "")
	if err != nil {
		t.Fatal(err)
	}
	g, gctx := errgroup.WithContext(ctx)
	agentCtx, stopAgent := context.WithCancel(gctx)
	defer func() {
		stopAgent()
		if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("added node: %v", err)
		}
	}()
	eng, err := startEngine(agentCtx, g, "llama-8b", 50)
	if err != nil {
		t.Fatal(err)
	}
	a, err := nodeagent.New(nodeagent.Config{
		ServerURL: second.nodeURL, NodeID: "onprem-1", Token: nodeproto.Secret(issued.Token), EngineURL: eng.url,
		Models: []nodeproto.Model{{Name: "llama-8b", ServedName: "llama-8b", MaxNumSeqs: eng.maxNumSeqs,
			MaxModelLen: int(eng.maxModelLen), KVCapacityTokens: eng.kvTokens}},
		Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	g.Go(func() error { return a.Run(agentCtx) })
	waitNodesLive(ctx, t, adm, len(DefaultModels)+1)
	http.DefaultClient.CloseIdleConnections()
}

// adminClient is an admin API client on r's printed URL and token.
func adminClient(t *testing.T, r *devRun) *adminclient.Client {
	t.Helper()
	c, err := adminclient.NewClient(strings.TrimSuffix(r.baseURL, "/v1"), r.adminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitNodesLive waits until the nodes view lists n nodes, each live and
// healthy.
func waitNodesLive(ctx context.Context, t *testing.T, adm *adminclient.Client, n int) {
	t.Helper()
	testenv.EventuallyWithin(t, readyTimeout, fmt.Sprintf("the nodes view to list %d live nodes", n), func() bool {
		nodes, err := adm.ListNodes(ctx)
		if err != nil {
			return false
		}
		live := 0
		for _, nd := range nodes.Data {
			if nd.Live != nil && nd.Live.Healthy {
				live++
			}
		}
		return live == n && len(nodes.Data) == n
	})
}

// TestLocalModeShowsThePendingGaugeOfADeclaredModel: the local mode's
// orchestrator is wired as the command's, with the declared models, so
// its /metrics carries the pending gauge — the signal that wakes a model
// at zero — for a model declared after the start that no node serves.
func TestLocalModeShowsThePendingGaugeOfADeclaredModel(t *testing.T) {
	r := startDevOn(t, "")
	if _, _, err := adminClient(t, r).PutModel(t.Context(), "mistral-7b", adminwire.ModelSpec{ServedName: "mistral-7b",
		PromptPriceMicroPerMTok: 100_000, CompletionPriceMicroPerMTok: 500_000, MaxContextTokens: 8192, MaxOutputTokens: 1024}); err != nil {
		t.Fatal(err)
	}
	want := `llmplat_model_pending_requests{model="mistral-7b"} 0`
	var got string
	testenv.Eventually(t, "the pending gauge of the declared model on "+r.metricsURL, func() bool {
		resp, err := http.Get(r.metricsURL)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		got = string(body)
		return err == nil && strings.Contains(got, want)
	})
	http.DefaultClient.CloseIdleConnections()
}

// TestLocalModeConsole follows the printed console line: the page it names
// offers the sign-in form, and the printed key signs in to the team's
// usage page. The admin token signs in to the platform pages, where the
// GPU-hours page says why its GPU columns are zero here: the local nodes
// are simulated engines that register no GPU.
func TestLocalModeConsole(t *testing.T) {
	r := startDevOn(t, "")
	platformtest.ConsoleSignIn(t, r.consoleURL, r.key, "/console/usage")
	admin, _ := platformtest.ConsoleSignIn(t, r.consoleURL, r.adminToken, "/console/platform/nodes")
	defer admin.CloseIdleConnections()
	resp, err := admin.Get(r.consoleURL + "/platform/cost")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GPU-hours page: %d, %v", resp.StatusCode, err)
	}
	note := regexp.MustCompile(`(?s)<p class="note" id="no-gpus">(.*?)</p>`).FindSubmatch(body)
	if note == nil {
		t.Fatalf("the GPU-hours page does not say why the local mode has no GPU-hours:\n%s", body)
	}
	for _, want := range []string{"3 nodes", "local-llama-8b", "registered no GPU", "simulated engines"} {
		if !strings.Contains(string(note[1]), want) {
			t.Errorf("the note %q lacks %q", note[1], want)
		}
	}
}
