package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/openai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newGateway returns a gateway in front of one engine handler.
func newGateway(t *testing.T, engine http.Handler, logs io.Writer) *httptest.Server {
	t.Helper()
	eng := httptest.NewServer(engine)
	t.Cleanup(eng.Close)
	if logs == nil {
		logs = io.Discard
	}
	s, err := New(Config{
		Dispatcher: dispatch.NewDirect(map[string][]dispatch.Target{"llama-8b": {{URL: eng.URL, ServedName: "llama-8b"}}}, eng.Client()),
		Models:     []openai.Model{{ID: "llama-8b", Object: "model"}},
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(s.Handler())
	t.Cleanup(gw.Close)
	return gw
}

func golden(t *testing.T) http.Handler {
	t.Helper()
	stream, err := os.ReadFile(filepath.Join("..", "openai", "testdata", "stream_include_usage.golden"))
	if err != nil {
		t.Fatal(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(stream)
	})
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const prompt = `"messages":[{"role":"user","content":"a secret prompt"}]`

func TestStreamRelay(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "openai", "testdata", "stream_include_usage.golden"))
	if err != nil {
		t.Fatal(err)
	}
	wantNoUsage, err := os.ReadFile(filepath.Join("..", "openai", "testdata", "stream_no_usage.golden"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		body string
		want []byte
	}{
		{name: "usage asked", body: `{"model":"llama-8b","stream":true,"stream_options":{"include_usage":true},` + prompt + `}`, want: want},
		{name: "usage stripped", body: `{"model":"llama-8b","stream":true,` + prompt + `}`, want: wantNoUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := newGateway(t, golden(t), nil)
			resp := post(t, gw.URL, tt.body)
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d %q, want 200 event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if resp.Header.Get("X-Request-Id") == "" {
				t.Error("no x-request-id")
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("relayed stream differs\ngot:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestNonStreamAssembled(t *testing.T) {
	gw := newGateway(t, golden(t), nil)
	resp := post(t, gw.URL, `{"model":"llama-8b",`+prompt+`}`)
	var got openai.ChatCompletion
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || got.Object != "chat.completion" || *got.Choices[0].Message.Content != "Hello world" ||
		got.Choices[0].FinishReason != "stop" || got.Usage == nil || got.Usage.CompletionTokens != 2 {
		t.Errorf("got %d %+v, want 200 with \"Hello world\", stop and usage", resp.StatusCode, got)
	}
}

func TestErrorsInOpenAIShape(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		status int
		param  string
	}{
		{name: "bad json", body: `{"model":`, status: 400},
		{name: "no messages", body: `{"model":"llama-8b","messages":[]}`, status: 400, param: "messages"},
		{name: "unknown model", body: `{"model":"gpt-9",` + prompt + `}`, status: 404, param: "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := newGateway(t, golden(t), nil)
			resp := post(t, gw.URL, tt.body)
			var e openai.ErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || e.Error.Message == "" || e.Error.Type == "" {
				t.Errorf("got %d %+v, want %d with message and type", resp.StatusCode, e, tt.status)
			}
			if tt.param != "" && (e.Error.Param == nil || *e.Error.Param != tt.param) {
				t.Errorf("param = %v, want %q", e.Error.Param, tt.param)
			}
		})
	}
}

// TestClientDisconnectAbortsEngine: when the client leaves mid-stream the
// engine's request ends too, and no goroutine is left (goleak in TestMain).
func TestClientDisconnectAbortsEngine(t *testing.T) {
	aborted := make(chan struct{})
	engine := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				close(aborted)
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	var logs bytes.Buffer
	gw := newGateway(t, engine, &logs)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"llama-8b","stream":true,`+prompt+`}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := openai.NewSSEReader(resp.Body)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("engine still generating after the client left")
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestPromptNeverLogged captures the logs of full requests and checks that
// neither prompt nor answer text appears.
func TestPromptNeverLogged(t *testing.T) {
	var logs bytes.Buffer
	gw := newGateway(t, golden(t), &logs)
	for _, body := range []string{
		`{"model":"llama-8b","stream":true,` + prompt + `}`,
		`{"model":"llama-8b",` + prompt + `}`,
		`{"model":"gpt-9",` + prompt + `}`,
	} {
		resp := post(t, gw.URL, body)
		_, _ = io.ReadAll(resp.Body)
	}
	if logs.Len() == 0 {
		t.Fatal("no logs captured: the test would prove nothing")
	}
	for _, secret := range []string{"secret prompt", "Hello", "world"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("logs contain %q:\n%s", secret, logs.String())
		}
	}
}
