package admin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/jsonvariant"
	"github.com/llmplat/llmplat/runtime/strictjson"
)

// FuzzDecodeBody: the admin API's strict decoder never panics, answers a
// refusal with a 4xx, and accepts only bodies an exact parser reads the
// same way: every key it reports present is a key of the body spelled
// exactly, and the team a credit names is the one the body names.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"team_id":1,"amount_microcredits":5,"idempotency_key":"k"}`,
		`{"team_id":1,"team_id":2,"amount_microcredits":5,"idempotency_key":"k"}`,
		`{"Team_ID":1}`, `{"note":"a\u0007"}`, `[]`, `null`,
		`{"note":` + nest(`[`, `]`, strictjson.MaxDepth) + `}`, `{"note":` + nest(`{"a":`, `}`, strictjson.MaxDepth-1) + `}`,
	} {
		f.Add([]byte(s))
	}
	gin.SetMode(gin.ReleaseMode)
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest(http.MethodPost, "/admin/credits", bytes.NewReader(body))
		var req adminwire.CreditRequest
		present, ok := decodeBody(c, &req)
		if !ok {
			if w.Code < 400 || w.Code > 499 {
				t.Fatalf("refusal with status %d", w.Code)
			}
			return
		}
		if depth := jsonvariant.Depth(body); depth > strictjson.MaxDepth {
			t.Fatalf("accepted a body %d deep", depth)
		}
		var exact map[string]json.RawMessage
		if err := json.Unmarshal(body, &exact); err != nil {
			t.Fatalf("accepted a body an exact parser refuses: %v", err)
		}
		for k := range present {
			if _, spelled := exact[k]; !spelled {
				t.Fatalf("reported %q present; the body spells no such key: %s", k, body)
			}
		}
		if raw, named := exact["team_id"]; named {
			var id int64
			if json.Unmarshal(raw, &id) == nil && id != req.TeamID {
				t.Fatalf("decoded team %d, the body names %d: %s", req.TeamID, id, body)
			}
		}
	})
}
