package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	oa "github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// TestTokensPerDayCapsTheAnswer: a key with few tokens left for the day
// asks for thousands and gets an answer cut to what the day has left (it
// got 4,107 before), with the ledger reserving and settling no more.
func TestTokensPerDayCapsTheAnswer(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	const perDay = 60
	key := s.key(adminwire.CreateKeyRequest{TeamID: team, TokensPerDay: perDay})
	// ignore_eos makes the simulator write up to max_tokens: without the
	// cap it would write 4,000.
	body := `{"model":"llama-8b","max_tokens":4000,"ignore_eos":true,"messages":[{"role":"user","content":"hello there"}]}`
	prompt := tokens.EstimateChat([]oa.Message{oa.TextMessage("user", "hello there")})
	resp, got := s.do(key, body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	var answer struct {
		Usage oa.Usage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(got), &answer); err != nil {
		t.Fatal(err)
	}
	want := perDay - prompt
	if answer.Usage.CompletionTokens != want {
		t.Errorf("completion tokens %d, want the day's %d left after the %d-token prompt estimate", answer.Usage.CompletionTokens, want, prompt)
	}
	if row := s.waitRow(resp.Header.Get("X-Request-Id")); row.completion != want {
		t.Errorf("ledger settled %d completion tokens, want %d", row.completion, want)
	}
}
