package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	oa "github.com/llmplat/llmplat/runtime/openai"
)

// TestTwoAuthorizationHeaders: a request with two Authorization headers,
// even two valid keys, is a 400 and costs nothing.
func TestTwoAuthorizationHeaders(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	for _, path := range []string{"/v1/chat/completions", "/v1/models", "/v1/usage"} {
		t.Run(path, func(t *testing.T) {
			method, body := http.MethodGet, io.Reader(nil)
			if strings.HasSuffix(path, "completions") {
				method, body = http.MethodPost, strings.NewReader(chatBody("llama-8b", false, 5))
			}
			req, err := http.NewRequest(method, s.url+path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Add("Authorization", "Bearer "+key)
			req.Header.Add("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e oa.ErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest || string(e.Error.Code) != `"duplicate_authorization"` {
				t.Errorf("status %d, error %+v; want 400 duplicate_authorization", resp.StatusCode, e.Error)
			}
		})
	}
	var rows int
	if err := s.db.QueryRowContext(t.Context(), "SELECT count(*) FROM usage_ledger").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d ledger rows written for refused requests", rows)
	}
}
