package devmode

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"

	"github.com/llmplat/llmplat/runtime/admin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is a writer safe for the local mode and the test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startDev runs the local mode and returns the printed base URL and key.
func startDev(t *testing.T) (baseURL, key, adminToken string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, logs := &syncBuffer{}, &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})) // as llmplat dev logs
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", TimeScale: 50, Stdout: out, Logger: logger})
	}()
	t.Cleanup(func() {
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
	deadline := time.Now().Add(60 * time.Second)
	for baseURL == "" || key == "" || adminToken == "" {
		select {
		case err := <-done:
			t.Fatalf("local mode exited before printing its credentials: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("local mode printed no credentials within 60 s:\n%s", out.String())
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if v, found := strings.CutPrefix(l, "OPENAI_BASE_URL="); found {
				baseURL = v
			}
			if v, found := strings.CutPrefix(l, "OPENAI_API_KEY="); found {
				key = v
			}
			if v, found := strings.CutPrefix(l, "LLMPLAT_ADMIN_TOKEN="); found {
				adminToken = v
			}
		}
	}
	return baseURL, key, adminToken
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
		t.Errorf("models = %v, want the seed's three", ids)
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
	var nodes admin.NodeList
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
	logs := &syncBuffer{}
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
