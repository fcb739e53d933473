package gateway

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

func TestDayCap(t *testing.T) {
	tests := []struct {
		name                string
		asked, left, prompt int64
		want                int64
	}{
		{"no daily limit keeps the ask", 500, -1, 20, 500},
		{"no daily limit, no ask", 0, -1, 20, 0},
		{"room above the ask", 500, 10_000, 20, 500},
		{"ask above the room", 4000, 60, 20, 40},
		{"no ask takes the room", 0, 60, 20, 40},
		{"prompt beyond the room still gets a token", 4000, 10, 20, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dayCap(tt.asked, tt.left, tt.prompt); got != tt.want {
				t.Errorf("dayCap(%d, %d, %d) = %d, want %d", tt.asked, tt.left, tt.prompt, got, tt.want)
			}
		})
	}
}
