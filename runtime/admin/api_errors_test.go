package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// errorShape decodes an OpenAI error body and checks it has exactly the
// four fields; it returns type, code and param ("" for null).
func errorShape(t *testing.T, body string) (typ, code, param string) {
	t.Helper()
	var outer map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &outer); err != nil || len(outer) != 1 || outer["error"] == nil {
		t.Fatalf("body %q is not {\"error\":{…}}", body)
	}
	inner := outer["error"]
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := inner[k]; !ok {
			t.Fatalf("error body %q has no %q", body, k)
		}
	}
	if len(inner) != 4 {
		t.Fatalf("error body %q has extra fields", body)
	}
	_ = json.Unmarshal(inner["type"], &typ)
	_ = json.Unmarshal(inner["code"], &code)
	_ = json.Unmarshal(inner["param"], &param)
	return typ, code, param
}

func TestAuthenticationAndRoles(t *testing.T) {
	h := newHarness(t, testenv.Postgres(t), harnessOptions{})
	team := h.team(t, "search")
	key, err := h.client.CreateKey(t.Context(), adminwire.CreateKeyRequest{TeamID: team}, "")
	if err != nil {
		t.Fatal(err)
	}
	routes := []struct{ method, path, body string }{
		{http.MethodGet, "/admin/teams", ""},
		{http.MethodPost, "/admin/keys", `{"team_id":` + itoa(team) + `,"bogus":true}`},
		{http.MethodDelete, "/admin/keys/" + itoa(key.ID), ""},
		{http.MethodPut, "/admin/models/llama-8b", `{}`},
		{http.MethodPost, "/admin/nodes/n1/tokens", ""},
	}
	revoked, err := h.client.CreateKey(t.Context(), adminwire.CreateKeyRequest{TeamID: team}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.RevokeKey(t.Context(), revoked.ID); err != nil {
		t.Fatal(err)
	}
	creds := []struct {
		name       string
		header     string
		wantStatus int
		wantType   string
		wantCode   string
	}{
		{"no credential", "", http.StatusUnauthorized, "authentication_error", codeMissingAPIKey},
		{"unknown credential", "Bearer not-a-known-token", http.StatusUnauthorized, "authentication_error", codeInvalidAPIKey},
		{"unknown api key", "Bearer llp_" + strings.Repeat("a", 43), http.StatusUnauthorized, "authentication_error", codeInvalidAPIKey},
		{"revoked api key", "Bearer " + revoked.Secret, http.StatusUnauthorized, "authentication_error", codeRevokedAPIKey},
		{"basic scheme", "Basic " + h.adminToken, http.StatusUnauthorized, "authentication_error", codeInvalidAPIKey},
		{"user api key", "Bearer " + key.Secret, http.StatusForbidden, "permission_error", codeAdminRequired},
		{"key store down", "Bearer " + unavailableToken, http.StatusServiceUnavailable, "service_unavailable_error", codeUnavailable},
	}
	for _, cr := range creds {
		for _, rt := range routes {
			t.Run(cr.name+" "+rt.method+" "+rt.path, func(t *testing.T) {
				status, body, hdr := h.raw(t, rt.method, rt.path, rt.body, http.Header{"Authorization": {cr.header}})
				typ, code, _ := errorShape(t, body)
				if status != cr.wantStatus || typ != cr.wantType || code != cr.wantCode {
					t.Errorf("got %d %s %s, want %d %s %s", status, typ, code, cr.wantStatus, cr.wantType, cr.wantCode)
				}
				if id := hdr.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") || len(id) != len("req_")+32 {
					t.Errorf("x-request-id = %q, want req_ and 32 hex digits", id)
				}
				if status == http.StatusUnauthorized && hdr.Get("WWW-Authenticate") == "" {
					t.Errorf("401 without WWW-Authenticate")
				}
				if status == http.StatusServiceUnavailable && hdr.Get("Retry-After") == "" {
					t.Errorf("503 without Retry-After")
				}
			})
		}
	}
	if got, err := h.client.GetKey(t.Context(), key.ID); err != nil || got.RevokedAt != nil {
		t.Errorf("after refused calls: key = %+v, %v; want it not revoked", got, err)
	}
}

func TestRequestValidation(t *testing.T) {
	h := newHarness(t, testenv.Postgres(t), harnessOptions{})
	team := itoa(h.team(t, "search"))
	model := `"served_name":"m","prompt_price_micro_per_mtok":1,"completion_price_micro_per_mtok":1,"max_context_tokens":100`
	tests := []struct {
		name, method, path, body string
		header                   http.Header
		wantStatus               int
		wantCode, wantParam      string
	}{
		{"unknown field", "POST", "/admin/teams", `{"name":"a","extra":1}`, nil, 400, codeUnknownField, "extra"},
		{"field in another case", "POST", "/admin/teams", `{"Name":"a"}`, nil, 400, codeVariantKey, "name"},
		{"team id twice in a credit", "POST", "/admin/credits", `{"team_id":` + team + `,"team_id":999,"amount_microcredits":1,"idempotency_key":"k"}`, nil, 400, codeDuplicateKey, "team_id"},
		{"kelvin-sign variant", "POST", "/admin/keys", `{"team_id":` + team + `,"to` + "\u212a" + `ens_per_day":5}`, nil, 400, codeVariantKey, "tokens_per_day"},
		{"missing team name", "POST", "/admin/teams", `{}`, nil, 400, codeInvalidValue, "name"},
		{"not json", "POST", "/admin/teams", `name=a`, nil, 400, codeInvalidJSON, ""},
		{"array body", "POST", "/admin/teams", `[{"name":"a"}]`, nil, 400, codeInvalidJSON, ""},
		{"two objects", "POST", "/admin/teams", `{"name":"a"}{"name":"b"}`, nil, 400, codeInvalidJSON, ""},
		{"null body", "POST", "/admin/teams", `null`, nil, 400, codeInvalidJSON, ""},
		{"empty body", "POST", "/admin/teams", ``, nil, 400, codeInvalidJSON, ""},
		{"wrong type", "POST", "/admin/teams", `{"name":5}`, nil, 400, codeInvalidValue, "name"},
		{"team id as string", "POST", "/admin/credits", `{"team_id":"1","amount_microcredits":1,"idempotency_key":"k"}`, nil, 400, codeInvalidValue, "team_id"},
		{"control character in note", "POST", "/admin/credits", `{"team_id":` + team + `,"amount_microcredits":1,"idempotency_key":"k","note":"a\u0007"}`, nil, 400, codeInvalidValue, "note"},
		{"grant beyond the bound", "POST", "/admin/credits", `{"team_id":` + team + `,"amount_microcredits":1000000000000001,"idempotency_key":"k"}`, nil, 400, codeInvalidValue, "amount_microcredits"},
		{"negative rpm", "POST", "/admin/keys", `{"team_id":` + team + `,"rpm":-1}`, nil, 400, codeInvalidValue, "rpm"},
		{"rpm beyond int32", "POST", "/admin/keys", `{"team_id":` + team + `,"rpm":3000000000}`, nil, 400, codeInvalidValue, "rpm"},
		{"negative max streams", "POST", "/admin/keys", `{"team_id":` + team + `,"max_streams":-1}`, nil, 400, codeInvalidValue, "max_streams"},
		{"negative tokens per day", "POST", "/admin/keys", `{"team_id":` + team + `,"tokens_per_day":-5}`, nil, 400, codeInvalidValue, "tokens_per_day"},
		{"negative max tokens", "POST", "/admin/keys", `{"team_id":` + team + `,"max_tokens":-1}`, nil, 400, codeInvalidValue, "max_tokens"},
		{"max tokens beyond int32", "POST", "/admin/keys", `{"team_id":` + team + `,"max_tokens":2147483648}`, nil, 400, codeInvalidValue, "max_tokens"},
		{"max tokens not an integer", "POST", "/admin/keys", `{"team_id":` + team + `,"max_tokens":1.5}`, nil, 400, codeInvalidValue, "max_tokens"},
		{"max tokens as a string", "POST", "/admin/keys", `{"team_id":` + team + `,"max_tokens":"1024"}`, nil, 400, codeInvalidValue, "max_tokens"},
		{"max tokens in another case", "POST", "/admin/keys", `{"team_id":` + team + `,"Max_Tokens":1024}`, nil, 400, codeVariantKey, "max_tokens"},
		{"patch with negative max tokens", "PATCH", "/admin/keys/1", `{"max_tokens":-1}`, nil, 400, codeInvalidValue, "max_tokens"},
		{"null limit", "POST", "/admin/keys", `{"team_id":` + team + `,"rpm":null}`, nil, 400, codeInvalidValue, "rpm"},
		{"duplicate allowlist entry", "POST", "/admin/keys", `{"team_id":` + team + `,"model_allowlist":["a","a"]}`, nil, 400, codeInvalidValue, "model_allowlist"},
		{"bad allowlist name", "POST", "/admin/keys", `{"team_id":` + team + `,"model_allowlist":["bad name"]}`, nil, 400, codeInvalidValue, "model_allowlist"},
		{"expiry in the past", "POST", "/admin/keys", `{"team_id":` + team + `,"expires_at":"2020-01-01T00:00:00Z"}`, nil, 400, codeInvalidValue, "expires_at"},
		{"expiry not a time", "POST", "/admin/keys", `{"team_id":` + team + `,"expires_at":"tomorrow"}`, nil, 400, codeInvalidValue, "expires_at"},
		{"no team", "POST", "/admin/keys", `{"team_id":0}`, nil, 400, codeInvalidValue, "team_id"},
		{"idempotency key with a space", "POST", "/admin/keys", `{"team_id":` + team + `}`, http.Header{"Idempotency-Key": {"a b"}}, 400, codeInvalidValue, "Idempotency-Key"},
		{"patch with a bad expiry", "PATCH", "/admin/keys/1", `{"expires_at":"nope"}`, nil, 400, codeInvalidValue, "expires_at"},
		{"non-numeric key id", "PATCH", "/admin/keys/abc", `{}`, nil, 400, codeInvalidValue, "id"},
		{"missing model field", "PUT", "/admin/models/m", `{` + model + `}`, nil, 400, codeInvalidValue, "max_output_tokens"},
		{"empty served name", "PUT", "/admin/models/m", `{` + strings.Replace(model, `"m"`, `""`, 1) + `,"max_output_tokens":1}`, nil, 400, codeInvalidValue, "served_name"},
		{"zero context", "PUT", "/admin/models/m", `{` + strings.Replace(model, `:100`, `:0`, 1) + `,"max_output_tokens":1}`, nil, 400, codeInvalidValue, "max_context_tokens"},
		{"negative price", "PUT", "/admin/models/m", `{` + strings.Replace(model, `_mtok":1,"completion`, `_mtok":-1,"completion`, 1) + `,"max_output_tokens":1}`, nil, 400, codeInvalidValue, "prompt_price_micro_per_mtok"},
		{"bad node id", "POST", "/admin/nodes/a%20b/tokens", ``, nil, 400, codeInvalidValue, "id"},
		{"body over the limit", "POST", "/admin/teams", `{"name":"` + strings.Repeat("a", maxBodyBytes) + `"}`, nil, 413, codeTooLarge, ""},
		{"unknown route", "GET", "/admin/nope", ``, nil, 404, codeNotFound, ""},
		{"wrong method", "DELETE", "/admin/teams", ``, nil, 405, codeMethodForbidden, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := h.raw(t, tt.method, tt.path, tt.body, tt.header)
			_, code, param := errorShape(t, body)
			if status != tt.wantStatus || code != tt.wantCode || param != tt.wantParam {
				t.Errorf("got %d %s param %q (%s), want %d %s param %q", status, code, param, body, tt.wantStatus, tt.wantCode, tt.wantParam)
			}
		})
	}
	t.Run("chunked body over the limit", func(t *testing.T) {
		body := io.MultiReader(strings.NewReader(`{"name":"`), strings.NewReader(strings.Repeat("a", maxBodyBytes)), strings.NewReader(`"}`))
		req, err := http.NewRequest(http.MethodPost, h.url+"/admin/teams", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+h.adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if req.ContentLength != 0 {
			t.Fatalf("request declared a length of %d; the test needs a chunked body", req.ContentLength)
		}
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("chunked oversize body: status %d, want 413", resp.StatusCode)
		}
	})
	if teams, err := h.client.ListTeams(t.Context()); err != nil || len(teams) != 1 {
		t.Errorf("teams after refused creates = %d, %v; want 1", len(teams), err)
	}
}
