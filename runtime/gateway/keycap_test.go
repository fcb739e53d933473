package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/ledger"
	oa "github.com/llmplat/llmplat/runtime/openai"
)

// engineAsk is the output limit one request named to the engine; nil is
// absent.
type engineAsk struct {
	MaxTokens           *int64 `json:"max_tokens"`
	MaxCompletionTokens *int64 `json:"max_completion_tokens"`
}

// recordingEngine answers every request with a short finished stream and
// keeps, by the gateway's request id, the output limit each request named.
type recordingEngine struct {
	mu   sync.Mutex
	asks map[string]engineAsk
}

func newRecordingEngine() *recordingEngine {
	return &recordingEngine{asks: map[string]engineAsk{}}
}

func (e *recordingEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ask engineAsk
	if err := json.NewDecoder(r.Body).Decode(&ask); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	e.asks[r.Header.Get("X-Request-Id")] = ask
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"}}]}`+"\n\n")
	fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
	fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":1,"total_tokens":21}}`+"\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// ask returns what the engine was asked for the request with id.
func (e *recordingEngine) ask(t *testing.T, id string) engineAsk {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.asks[id]
	if !ok {
		t.Fatalf("the engine saw no request %q", id)
	}
	return a
}

// reservedRow is what the ledger reserved for a request.
func (s *stack) reservedRow(requestID string) (maxOut, microcredits int64) {
	s.t.Helper()
	err := s.db.QueryRowContext(context.Background(),
		"SELECT max_output_tokens, reserved_microcredits FROM usage_ledger WHERE request_id = $1", requestID).
		Scan(&maxOut, &microcredits)
	if err != nil {
		s.t.Fatalf("read the reservation of %s: %v", requestID, err)
	}
	return maxOut, microcredits
}

// TestKeyMaxTokensClampsTheAsk: a key with max_tokens sends the engine at
// most its cap, whatever the client asked (nothing, more, through
// max_completion_tokens), keeps a smaller ask, and the ledger reserves
// for exactly what the engine was sent; a key without the cap gets the
// model's 4,096.
func TestKeyMaxTokensClampsTheAsk(t *testing.T) {
	const limit = 100
	engine := newRecordingEngine()
	s := newStack(t, stackOpts{engine: engine})
	team := s.team("alpha", 10*credit)
	capped := s.key(adminwire.CreateKeyRequest{TeamID: team, MaxTokens: limit})
	open := s.key(adminwire.CreateKeyRequest{TeamID: team})
	const msgs = `"messages":[{"role":"user","content":"tell me about llamas"}]`
	tests := []struct {
		name, key, body string
		want            int64
	}{
		{"no max_tokens gets the cap", capped, `{"model":"llama-8b",` + msgs + `}`, limit},
		{"max_tokens above the cap is clamped", capped, `{"model":"llama-8b","max_tokens":4000,` + msgs + `}`, limit},
		{"max_completion_tokens above the cap is clamped", capped, `{"model":"llama-8b","max_completion_tokens":4000,` + msgs + `}`, limit},
		{"a stream above the cap is clamped", capped, `{"model":"llama-8b","stream":true,"max_tokens":4000,` + msgs + `}`, limit},
		{"max_tokens at the cap is kept", capped, `{"model":"llama-8b","max_tokens":100,` + msgs + `}`, limit},
		{"max_tokens below the cap is kept", capped, `{"model":"llama-8b","max_tokens":20,` + msgs + `}`, 20},
		{"max_completion_tokens below the cap is kept", capped, `{"model":"llama-8b","max_completion_tokens":20,` + msgs + `}`, 20},
		{"a key without the cap gets the model's output", open, `{"model":"llama-8b",` + msgs + `}`, 4096},
		{"a key without the cap keeps a large ask", open, `{"model":"llama-8b","max_tokens":4000,` + msgs + `}`, 4000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := s.do(tt.key, tt.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			id := resp.Header.Get("X-Request-Id")
			got := engine.ask(t, id)
			if got.MaxTokens == nil || *got.MaxTokens != tt.want || got.MaxCompletionTokens != nil {
				t.Errorf("engine asked max_tokens %v, max_completion_tokens %v; want max_tokens %d alone",
					deref(got.MaxTokens), deref(got.MaxCompletionTokens), tt.want)
			}
			maxOut, reserved := s.reservedRow(id)
			wantReserved := ledger.Cost(promptEstimate(t, tt.body), tt.want, promptPrice, completionPrice)
			if maxOut != tt.want || reserved != wantReserved {
				t.Errorf("reservation: %d output tokens for %d micro-credits, want %d for %d", maxOut, reserved, tt.want, wantReserved)
			}
		})
	}
}

// TestKeyMaxTokensComposesWithTokensPerDay: with both limits, the engine
// is sent the smaller of the key's cap and what the day has left after
// the prompt, and the ledger reserves for that.
func TestKeyMaxTokensComposesWithTokensPerDay(t *testing.T) {
	engine := newRecordingEngine()
	s := newStack(t, stackOpts{engine: engine})
	team := s.team("alpha", 10*credit)
	body := `{"model":"llama-8b","max_tokens":4000,"messages":[{"role":"user","content":"tell me about llamas"}]}`
	prompt := promptEstimate(t, body)
	tests := []struct {
		name         string
		limit        int
		tokensPerDay int64
		want         int64
	}{
		{"the day's room is smaller", 100, prompt + 30, 30},
		{"the key's cap is smaller", 10, 1_000_000, 10},
		{"the day's room equals the cap", 50, prompt + 50, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := s.key(adminwire.CreateKeyRequest{TeamID: team, MaxTokens: tt.limit, TokensPerDay: tt.tokensPerDay})
			resp, got := s.do(key, body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, got)
			}
			id := resp.Header.Get("X-Request-Id")
			if ask := engine.ask(t, id); ask.MaxTokens == nil || *ask.MaxTokens != tt.want {
				t.Errorf("engine asked max_tokens %v, want %d", deref(ask.MaxTokens), tt.want)
			}
			if maxOut, _ := s.reservedRow(id); maxOut != tt.want {
				t.Errorf("reserved %d output tokens, want %d", maxOut, tt.want)
			}
		})
	}
}

// TestKeyMaxTokensCapsTheAnswer: a client asking thousands of tokens of
// an engine that writes until max_tokens (ignore_eos) gets an answer of
// the key's cap, and the ledger settles that many.
func TestKeyMaxTokensCapsTheAnswer(t *testing.T) {
	const limit = 37
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team, MaxTokens: limit})
	body := `{"model":"llama-8b","max_tokens":4000,"ignore_eos":true,"messages":[{"role":"user","content":"hello there"}]}`
	resp, got := s.do(key, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	var answer struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage oa.Usage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(got), &answer); err != nil || len(answer.Choices) != 1 {
		t.Fatalf("answer %s: %v", got, err)
	}
	if answer.Usage.CompletionTokens != limit || answer.Choices[0].FinishReason != "length" {
		t.Errorf("answer of %d completion tokens, finish_reason %q; want the cap's %d and \"length\"",
			answer.Usage.CompletionTokens, answer.Choices[0].FinishReason, limit)
	}
	if row := s.waitRow(resp.Header.Get("X-Request-Id")); row.status != "settled" || row.completion != limit {
		t.Errorf("ledger row %+v, want settled at %d completion tokens", row, limit)
	}
}

// deref shows a limit that may be absent.
func deref(p *int64) any {
	if p == nil {
		return "absent"
	}
	return *p
}
