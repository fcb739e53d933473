package admin

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/strictjson"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// nest returns n levels of open around "0", closed.
func nest(open, close string, n int) string {
	return strings.Repeat(open, n) + "0" + strings.Repeat(close, n)
}

// TestDeepBodyRefused: an admin body nested past strictjson.MaxDepth is
// refused with a 400 naming the limit, whatever route and field it
// nests in. Nested 20000 deep, a 40 KB body used to cost the API
// hundreds of megabytes in path strings (a 200 KB POST /admin/teams took
// a gateway from 15 to 20.7 GB).
func TestDeepBodyRefused(t *testing.T) {
	h := newHarness(t, testenv.Postgres(t), harnessOptions{})
	team := itoa(h.team(t, "search"))
	const levels = 20000
	for _, tt := range []struct{ name, method, path, body string }{
		{"arrays in a team's name", "POST", "/admin/teams", `{"name":` + nest(`[`, `]`, levels) + `}`},
		{"objects in an unknown field", "POST", "/admin/teams", `{"name":"deep","x":` + nest(`{"a":`, `}`, levels) + `}`},
		{"escaped keys in a key's allowlist", "POST", "/admin/keys", `{"team_id":` + team + `,"model_allowlist":` + nest(`{"\u0061":`, `}`, levels) + `}`},
		{"a credit's note", "POST", "/admin/credits", `{"team_id":` + team + `,"amount_microcredits":1,"idempotency_key":"k","note":` + nest(`[{"a":`, `}]`, levels/2) + `}`},
		{"the body itself", "POST", "/admin/teams", nest(`[`, `]`, levels)},
		{"one past the limit", "POST", "/admin/teams", `{"name":` + nest(`[`, `]`, strictjson.MaxDepth) + `}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := h.raw(t, tt.method, tt.path, tt.body, nil)
			typ, code, _ := errorShape(t, body)
			if status != http.StatusBadRequest || typ != openai.TypeInvalidRequest || code != codeTooDeep {
				t.Errorf("got %d %s %s (%s), want 400 %s %s", status, typ, code, body, openai.TypeInvalidRequest, codeTooDeep)
			}
			if want := fmt.Sprintf("deeper than %d levels", strictjson.MaxDepth); !strings.Contains(body, want) {
				t.Errorf("the refusal does not name the limit (%q): %s", want, body)
			}
		})
	}
	teams, err := h.client.ListTeams(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(teams) != 1 {
		t.Errorf("after refused bodies: %d teams, want the one made first", len(teams))
	}
}

// maxDecodeBytesPerByte bounds what decodeBody allocates per byte of a
// body: reading it (2), the key check's slow path (up to 70 for a body
// dense with scalars), the decode into raw members and fields; a field of
// the wrong type is decoded to its end with an error made per element
// (90 for "[0,0,0..." where strings are wanted). All of it is garbage
// when the decode ends.
const maxDecodeBytesPerByte = 128

// TestDecodeBodyMemoryIsLinear: decoding an admin body as large as the
// API takes costs memory linear in its size, whatever its nesting.
func TestDecodeBodyMemoryIsLinear(t *testing.T) {
	const size = maxBodyBytes - 1<<10
	repeat := func(item string) string {
		return strings.TrimSuffix(strings.Repeat(item+",", size/(len(item)+1)), ",")
	}
	gin.SetMode(gin.ReleaseMode)
	for name, body := range map[string]string{
		"deep arrays":        `{"name":` + nest(`[`, `]`, size/2) + `}`,
		"deep objects":       `{"name":` + nest(`{"a":`, `}`, size/6) + `}`,
		"deep escaped keys":  `{"name":` + nest(`{"\u0061":`, `}`, size/11) + `}`,
		"long allowlist":     `{"team_id":1,"model_allowlist":[` + repeat(`"m"`) + `]}`,
		"dense scalars":      `{"team_id":1,"model_allowlist":[` + repeat(`0`) + `]}`,
		"dense escaped keys": `{"team_id":1,"model_allowlist":[` + repeat(`{"\u0061":0}`) + `]}`,
	} {
		t.Run(name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodPost, "/admin/keys", bytes.NewReader([]byte(body)))
			var req adminwire.CreateKeyRequest
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			decodeBody(c, &req)
			runtime.ReadMemStats(&after)
			got := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes allocated for a %d-byte body: %d", got, len(body), w.Code)
			if limit := uint64(maxDecodeBytesPerByte * len(body)); got > limit {
				t.Errorf("decodeBody allocated %d bytes for a %d-byte body, want at most %d", got, len(body), limit)
			}
			if deep := strings.HasPrefix(name, "deep"); deep && !strings.Contains(w.Body.String(), codeTooDeep) {
				t.Errorf("a deep body: %d %s, want %s", w.Code, w.Body, codeTooDeep)
			}
		})
	}
}
