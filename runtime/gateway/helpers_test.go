package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	oa "github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/tokens"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func chatBody(model string, stream bool, maxTokens int) string {
	return fmt.Sprintf(`{"model":%q,"stream":%v,"max_tokens":%d,"messages":[{"role":"user","content":"a secret prompt about llamas"}]}`, model, stream, maxTokens)
}

// errorCase is one refusal the gateway must give in the OpenAI shape.
type errorCase = ErrorCase

// ErrorCase is errorCase, exported for the black-box tests.
type ErrorCase struct {
	Name       string
	Status     int
	Typ, Code  string
	RetryAfter bool
}

func checkError(t *testing.T, resp *http.Response, body string, want errorCase) {
	t.Helper()
	var e oa.ErrorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("body %q is not an OpenAI error: %v", body, err)
	}
	var code string
	_ = json.Unmarshal(e.Error.Code, &code)
	if resp.StatusCode != want.Status || e.Error.Type != want.Typ || code != want.Code || e.Error.Message == "" {
		t.Errorf("got %d %s/%s %q, want %d %s/%s", resp.StatusCode, e.Error.Type, code, e.Error.Message, want.Status, want.Typ, want.Code)
	}
	if got := resp.Header.Get("Retry-After"); want.RetryAfter && (got == "" || got == "0") {
		t.Errorf("Retry-After = %q, want a positive number of seconds", got)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("no x-request-id on an error")
	}
}

// promptEstimate is the gateway's estimate of body's prompt, which the
// ledger reserves for.
func promptEstimate(t *testing.T, body string) int64 {
	t.Helper()
	var req oa.ChatCompletionRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	return tokens.EstimateRequest(&req)
}

// waitLimit bounds every wait of these tests for something the gateway
// does on its own: far beyond what any of it takes, so a slow machine
// passes and a broken gateway fails instead of hanging.
const waitLimit = 10 * time.Second

// waitClosed reports whether c is closed within d.
func waitClosed(c <-chan struct{}, d time.Duration) bool {
	select {
	case <-c:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c:
		return true
	case <-t.C:
		return false
	}
}

// noDNS resolves nothing: tests never leave the machine.
type noDNS struct{}

func (noDNS) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return nil, errors.New("no DNS in tests")
}
