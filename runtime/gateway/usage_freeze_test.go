package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// frozenAnswerBound is how long the test waits for an answer while
// PostgreSQL is frozen: six times the 5 s budget, so a busy machine does
// not fail the test, while a request that waits for the thaw never
// answers within it.
const frozenAnswerBound = 30 * time.Second

// TestUsageWhilePostgresFrozen: with PostgreSQL frozen, GET /v1/usage
// answers 503 in the OpenAI error shape while the database is still
// frozen, within its budget, instead of holding a goroutine and a pooled
// connection until the thaw; once the database thaws it answers 200.
func TestUsageWhilePostgresFrozen(t *testing.T) {
	s := newStack(t, stackOpts{proxied: true})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	// A first report puts the key in the gateway's cache: during the
	// freeze the credential is checked without the database, and the
	// report's own read is what meets the frozen server.
	if status, _ := s.usageReport(key); status != http.StatusOK {
		t.Fatalf("usage before the freeze: %d", status)
	}
	proxy := s.p.PostgresProxy
	proxy.Freeze()
	frozen := true
	defer func() {
		if frozen {
			proxy.Thaw()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), frozenAnswerBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/usage", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /v1/usage with PostgreSQL frozen: no answer after %v (%v): it waits for the thaw",
			time.Since(t0).Round(time.Millisecond), err)
	}
	defer resp.Body.Close()
	var e openai.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("GET /v1/usage with PostgreSQL frozen: %d, body not the OpenAI error shape: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Type != openai.TypeUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("GET /v1/usage with PostgreSQL frozen: %d %+v (Retry-After %q), want 503 %s with Retry-After",
			resp.StatusCode, e.Error, resp.Header.Get("Retry-After"), openai.TypeUnavailable)
	}
	t.Logf("GET /v1/usage with PostgreSQL frozen: %d after %v", resp.StatusCode, time.Since(t0).Round(time.Millisecond))
	proxy.Thaw()
	frozen = false
	testenv.EventuallyNil(t, frozenAnswerBound, "usage after the thaw", func() error {
		if status, _ := s.usageReport(key); status != http.StatusOK {
			return fmt.Errorf("usage after the thaw: %d", status)
		}
		return nil
	})
}
