package enginesim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/golden"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestRequestErrors checks the status, type and param of every refusal
// against vLLM's.
func TestRequestErrors(t *testing.T) {
	cfg := testConfig()
	cfg.MaxModelLen = 64
	s := newTestSim(t, cfg)
	srv := serve(t, s)
	long := strings.Repeat("word ", 60) // 60 tokens + 10 of template: over 64
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantType   string
		wantParam  string
	}{
		{"bad json", `{"model":`, 400, "BadRequestError", ""},
		{"no messages", `{"model":"` + s.ServedModelName() + `","messages":[]}`, 400, "BadRequestError", "messages"},
		{"unknown model", string(chatBody(t, s, "hi", map[string]any{"model": "gpt-nonexistent"})), 404, "NotFoundError", "model"},
		{"prompt at max_model_len", string(chatBody(t, s, long, nil)), 400, "BadRequestError", "input_tokens"},
		{"prompt plus max_tokens over max_model_len", string(chatBody(t, s, "hi", map[string]any{"max_tokens": 60})), 400, "BadRequestError", "input_tokens"},
		{"max_completion_tokens over max_model_len", string(chatBody(t, s, "hi", map[string]any{"max_completion_tokens": 60})), 400, "BadRequestError", "input_tokens"},
		{"zero max_tokens", string(chatBody(t, s, "hi", map[string]any{"max_tokens": 0})), 400, "BadRequestError", "max_tokens"},
		{"min_tokens over max_tokens", string(chatBody(t, s, "hi", map[string]any{"max_tokens": 5, "min_tokens": 6})), 400, "BadRequestError", "min_tokens"},
		{"ignore_eos not a bool", string(chatBody(t, s, "hi", map[string]any{"ignore_eos": "yes"})), 400, "BadRequestError", "ignore_eos"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(context.Background(), t, srv.URL, []byte(tt.body))
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			e := errorOf(t, resp)
			param := ""
			if e.Param != nil {
				param = *e.Param
			}
			if e.Type != tt.wantType || param != tt.wantParam || e.Status() != tt.wantStatus {
				t.Errorf("error = {type %q, param %q, code %d}, want {%q, %q, %d}", e.Type, param, e.Status(), tt.wantType, tt.wantParam, tt.wantStatus)
			}
		})
	}
	if st := s.Stats(); st.Waiting+st.Running != 0 {
		t.Errorf("refused requests reached the engine: %+v", st)
	}
}

// TestDefaultMaxTokens checks that without max_tokens the answer may run to
// max_model_len: with ignore_eos it fills the context exactly.
func TestDefaultMaxTokens(t *testing.T) {
	cfg := testConfig()
	cfg.MaxModelLen = 64
	s := newTestSim(t, cfg)
	srv := serve(t, s)
	got := make(chan completion, 1)
	go func() { got <- postCompletion(t, srv.URL, chatBody(t, s, "hi", map[string]any{"ignore_eos": true})) }()
	testenv.Eventually(t, "the request to queue", func() bool { return s.Stats().Waiting == 1 })
	for {
		if _, ok := s.Step(context.Background()); !ok {
			break
		}
	}
	c := <-got
	if c.Usage.TotalTokens != 64 || c.Choices[0].FinishReason != "length" {
		t.Errorf("usage %+v finish %q, want 64 tokens in all and length", c.Usage, c.Choices[0].FinishReason)
	}
}

func TestModels(t *testing.T) {
	s := newTestSim(t, testConfig())
	srv := serve(t, s)
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	golden.Check(t, "models.golden", b)
	var list openai.ModelList
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	if m := list.Data[0]; len(list.Data) != 1 || m.ID != s.ServedModelName() || m.OwnedBy != "vllm" || m.MaxModelLen != 8192 {
		t.Errorf("models = %+v, want the served model owned by vllm with max_model_len 8192", list)
	}
}

func TestCacheConfigInfo(t *testing.T) {
	s := newTestSim(t, testConfig())
	srv := serve(t, s)
	want := `vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="False",engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="` +
		itoa(s.Stats().KVBlocksTotal) + `"}`
	if got := scrape(t, srv.URL, want); got != 1 {
		t.Errorf("%s = %v, want 1", want, got)
	}
}

// TestHealthWhileLoading: /health and requests get 503 until the load time
// has passed once Run started.
func TestHealthWhileLoading(t *testing.T) {
	cfg := testConfig()
	cfg.Clock = NewScaledClock(1)
	cfg.LoadTime = time.Hour
	s := newTestSim(t, cfg)
	srv := serve(t, s)
	if got := health(t, srv.URL); got != 503 {
		t.Errorf("health before Run = %d, want 503", got)
	}
	runEngine(t, s)
	if got := health(t, srv.URL); got != 503 {
		t.Errorf("health while loading = %d, want 503", got)
	}
	resp := post(context.Background(), t, srv.URL, chatBody(t, s, "hi", nil))
	if e := errorOf(t, resp); resp.StatusCode != 503 || e.Type != "ServiceUnavailableError" {
		t.Errorf("request while loading = %d %s, want 503 ServiceUnavailableError", resp.StatusCode, e.Type)
	}

	cfg = testConfig() // a FakeClock: the load time passes at once
	cfg.LoadTime = time.Hour
	loaded := newTestSim(t, cfg)
	lsrv := serve(t, loaded)
	if got := health(t, lsrv.URL); got != 503 {
		t.Errorf("health before Run = %d, want 503", got)
	}
	runEngine(t, loaded)
	testenv.Eventually(t, "health to turn 200", func() bool { return health(t, lsrv.URL) == 200 })
}

func health(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); len(b) != 0 {
		t.Errorf("health body = %q, want empty", b)
	}
	return resp.StatusCode
}

type completion struct {
	Choices []struct {
		Message      struct{ Content string }
		FinishReason string `json:"finish_reason"`
	}
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	}
}

// postCompletion sends a request that is not streamed and decodes the
// answer; it may run on another goroutine, so it reports with Errorf.
func postCompletion(t *testing.T, url string, body []byte) completion {
	var c completion
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Errorf("POST: %v", err)
		return c
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("status %d: %s", resp.StatusCode, b)
		return c
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Errorf("decode: %v", err)
	}
	return c
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
