package platformtest

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// streamChatTimeout bounds one StreamChat: a short completion from a
// simulated engine ends in well under a second, so only a hung gateway or
// engine takes this long.
const streamChatTimeout = 2 * time.Minute

// StreamChat posts a streamed chat completion of model, asking for at most
// maxTokens, to the gateway at base with secret as the bearer credential,
// as an OpenAI client does. It reads the whole answer and returns its HTTP
// status and body; it fails the test only when no answer comes.
func StreamChat(tb testing.TB, base, secret, model string, maxTokens int) (int, []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), streamChatTimeout)
	defer cancel()
	body := `{"model":` + strconv.Quote(model) + `,"stream":true,"max_tokens":` + strconv.Itoa(maxTokens) +
		`,"messages":[{"role":"user","content":"hi"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("stream a chat completion of %s: %v", model, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read a chat completion of %s (status %d): %v", model, resp.StatusCode, err)
	}
	return resp.StatusCode, got
}
