package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	oa "github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/strictjson"
)

// TestDeepBodyRefused: a body nested past strictjson.MaxDepth, wherever
// it nests, is refused with a 400 naming the limit, before anything is
// reserved and before the engine sees it; a tool schema as deep as the
// limit allows is served. Nested 20000 deep, a 40 KB body used to cost
// the gateway hundreds of megabytes in path strings.
func TestDeepBodyRefused(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	const levels = 20000
	for _, tt := range []struct{ name, body string }{
		{"arrays in a message's content", withContent(nest(`[`, `]`, levels))},
		{"objects in a tool's parameters", withTool(nest(`{"a":`, `}`, levels))},
		{"escaped keys in a tool's parameters", withTool(nest(`{"\u0061":`, `}`, levels))},
		{"arrays and objects in an unknown field", `{"model":"llama-8b","x":` + nest(`{"a":[`, `]}`, levels/2) + `}`},
		{"the body itself", nest(`[`, `]`, levels)},
		{"one past the limit", withContent(nest(`[`, `]`, strictjson.MaxDepth-2))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := s.do(key, tt.body)
			checkError(t, resp, body, errorCase{tt.name, http.StatusBadRequest, oa.TypeInvalidRequest, "nesting_too_deep", false})
			if want := fmt.Sprintf("deeper than %d levels", strictjson.MaxDepth); !strings.Contains(body, want) {
				t.Errorf("the refusal does not name the limit (%q): %s", want, body)
			}
			if _, err := s.ledgerRow(resp.Header.Get("X-Request-Id")); err == nil {
				t.Error("a refused body reserved a ledger row")
			}
		})
	}
	if st := s.sims["llama-8b"].Stats(); st.Finished+st.Aborted+int64(st.Running) != 0 {
		t.Errorf("the engine saw a refused request: %+v", st)
	}
	// The body, the tools array, the tool, its function: four levels
	// above the schema.
	resp, body := s.do(key, withTool(nest(`{"a":`, `}`, strictjson.MaxDepth-4)))
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a tool schema %d levels deep in all: %d %s, want 200", strictjson.MaxDepth, resp.StatusCode, body)
	}
}
