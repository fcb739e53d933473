package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/hostilebody"
	"github.com/llmplat/llmplat/runtime/jsonvariant"
	oa "github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/strictjson"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

// nest returns n levels of open around "0", closed.
func nest(open, close string, n int) string {
	return strings.Repeat(open, n) + "0" + strings.Repeat(close, n)
}

// withTool is a chat request whose one tool's parameters are schema.
func withTool(schema string) string {
	return `{"model":"llama-8b","max_tokens":3,"messages":[{"role":"user","content":"hi"}],` +
		`"tools":[{"type":"function","function":{"name":"f","parameters":` + schema + `}}]}`
}

// withContent is a chat request whose one message's content is content.
func withContent(content string) string {
	return `{"model":"llama-8b","max_tokens":3,"messages":[{"role":"user","content":` + content + `}]}`
}

// hostileChatBodies are chat requests of about size bytes, nested and
// spread every way a client can: deep (refused), as deep as allowed and
// repeated, wide, dense with scalars, with escaped keys that send the key
// check to its slow path, and a long key above many values. Each content
// holds a colon, so the URL guard walks every body it is given.
func hostileChatBodies(size int) map[string]string {
	repeat := func(item string) string {
		n := max(1, size/(len(item)+1))
		return strings.TrimSuffix(strings.Repeat(item+",", n), ",")
	}
	var props strings.Builder
	for i := 0; props.Len() < size; i++ {
		fmt.Fprintf(&props, `"p%d":{"type":"string"},`, i)
	}
	const colon = `"a:b"`
	return map[string]string{
		"deep arrays":          withContent(nest(`[`, `]`, size/2)),
		"deep objects":         withTool(nest(`{"a":`, `}`, size/6)),
		"deep escaped keys":    withTool(nest(`{"\u0061":`, `}`, size/11)),
		"as deep as allowed":   withContent(`[` + repeat(nest(`[`, `]`, strictjson.MaxDepth-4)) + `,` + colon + `]`),
		"wide schema":          withTool(`{"type":"object","properties":{` + strings.TrimSuffix(props.String(), ",") + `}}`),
		"dense scalars":        withContent(`[` + repeat(`0`) + `,` + colon + `]`),
		"dense escaped keys":   withContent(`[` + repeat(`{"\u0061":0}`) + `,` + colon + `]`),
		"many messages":        `{"model":"llama-8b","messages":[` + repeat(`{"role":"user","content":"a:b"}`) + `]}`,
		"long key above zeros": withTool(`{"` + strings.Repeat("k", size/2) + `":[` + repeat(`0`)[:size/2] + `0],"x":` + colon + `}`),
	}
}

// decodingServer is a gateway with only what reading a body needs: its
// budget and its metrics.
var decodingServer = &Server{cfg: Config{Metrics: NewMetrics(nil)}, bodies: newBodyBudget(DefaultBodyBudget, DefaultBodyWait, nil)}

// decodeAll is the gateway's whole decode of a body: read, check, decode,
// validate, and the URL guard's walk.
func decodeAll(g *urlguard.Guard, body string) (*oa.ChatCompletionRequest, int) {
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	req, raw, held, ok := decodingServer.readRequest(c, nil)
	if !ok {
		return nil, w.Code
	}
	held.release()
	if err := g.CheckJSON(context.Background(), raw); err != nil {
		return nil, http.StatusBadRequest
	}
	return req, http.StatusOK
}

// decodeFixedBytes is what any decode may allocate besides its bounds per
// byte: the request's struct, gin's context, small buffers.
const decodeFixedBytes = 64 << 10

// decodeBound is what the gateway may allocate to read and decode body:
// the body itself, then what the body budget weighs for its decode — two
// bytes per byte and each decoded message's struct on the scan, which
// reads every SDK's bodies, or slowBodyWeight bytes per byte on the exact
// two-pass decode of a body the scan gives up on (at most
// MaxSlowBodyBytes). The budget (bodybudget.go) holds these figures while
// a body is decoded, so this test is what keeps its accounting true.
func decodeBound(body string) uint64 {
	n := int64(len(body))
	req, verdict := scanRequest([]byte(body), nil)
	switch verdict {
	case scanGaveUp:
		if n > MaxSlowBodyBytes {
			return uint64(n + decodeFixedBytes) // refused once read
		}
		return uint64(n + slowBodyWeight*n + decodeFixedBytes)
	case scanTooMany:
		return uint64(n + decodeFixedBytes)
	}
	return uint64(n + (bodyWeight-1)*n + int64(len(req.Messages))*messageSize + decodeFixedBytes)
}

// TestDecodeMemoryIsBounded: reading and decoding a body allocates no
// more than decodeBound — a small multiple of its size on the scan, and
// a bounded one on the exact decode, which takes small bodies only —
// whatever its nesting, width or spelling; a deep one is refused.
func TestDecodeMemoryIsBounded(t *testing.T) {
	g := &urlguard.Guard{}
	type tc struct {
		body   string
		status int
	}
	cases := map[string]tc{}
	for name, body := range hostileChatBodies(MaxSlowBodyBytes - 4<<10) {
		status := http.StatusOK
		if strings.HasPrefix(name, "deep") {
			status = http.StatusBadRequest
		}
		cases[name] = tc{body, status}
	}
	// The report's 8 MiB bodies: the one-word messages pass MaxMessages,
	// the escaped keys MaxSlowBodyBytes; the wide schema decodes.
	for _, sh := range hostilebody.Shapes {
		status := http.StatusBadRequest
		if sh.Name == "wide json_schema" {
			status = http.StatusOK
		}
		cases["8 MiB "+sh.Name] = tc{sh.Build(MaxBodyBytes), status}
	}
	cases["the most messages"] = tc{hostilebody.Messages(MaxMessages), http.StatusOK}
	cases["one message too many"] = tc{hostilebody.Messages(MaxMessages + 1), http.StatusBadRequest}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			limit := decodeBound(c.body)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, status := decodeAll(g, c.body)
			runtime.ReadMemStats(&after)
			got := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes allocated for a %d-byte body (%.1f per byte, bound %.1f): %d", got, len(c.body),
				float64(got)/float64(len(c.body)), float64(limit)/float64(len(c.body)), status)
			if got > limit {
				t.Errorf("decoding allocated %d bytes for a %d-byte body, want at most %d", got, len(c.body), limit)
			}
			if status != c.status {
				t.Errorf("status %d, want %d", status, c.status)
			}
		})
	}
}

// BenchmarkNestedBody reports the bytes the gateway allocates to decode
// bodies of each shape and size: they grow with the size, never with its
// square.
func BenchmarkNestedBody(b *testing.B) {
	g := &urlguard.Guard{}
	for _, size := range []int{16 << 10, 128 << 10, 1 << 20} {
		for name, body := range hostileChatBodies(size) {
			b.Run(fmt.Sprintf("%s/%dKiB", strings.ReplaceAll(name, " ", "_"), size>>10), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					decodeAll(g, body)
				}
			})
		}
	}
}

// FuzzDecodeBounded: whatever the body, the gateway's decode allocates at
// most decodeBound (and a fixed amount more for a small one), and accepts
// none nested past strictjson.MaxDepth.
func FuzzDecodeBounded(f *testing.F) {
	for _, body := range hostileChatBodies(4 << 10) {
		f.Add([]byte(body))
	}
	f.Add([]byte(withContent(nest(`[`, `]`, strictjson.MaxDepth-3))))
	f.Add([]byte(withContent(nest(`[`, `]`, strictjson.MaxDepth-2))))
	g := &urlguard.Guard{}
	f.Fuzz(func(t *testing.T, body []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		req, _ := decodeAll(g, string(body))
		runtime.ReadMemStats(&after)
		if got, limit := after.TotalAlloc-before.TotalAlloc, decodeBound(string(body))+256<<10; got > limit {
			t.Fatalf("decoding allocated %d bytes for a %d-byte body, want at most %d", got, len(body), limit)
		}
		if req != nil {
			raw, _ := json.Marshal(req)
			if depth := jsonvariant.Depth(raw); depth > strictjson.MaxDepth {
				t.Fatalf("accepted a body %d deep", depth)
			}
		}
	})
}
