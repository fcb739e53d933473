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

// decodeAll is the gateway's whole decode of a body: read, check, decode,
// validate, and the URL guard's walk.
func decodeAll(g *urlguard.Guard, body string) (*oa.ChatCompletionRequest, int) {
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	req, raw, ok := readRequest(c)
	if !ok {
		return nil, w.Code
	}
	if err := g.CheckJSON(context.Background(), raw); err != nil {
		return nil, http.StatusBadRequest
	}
	return req, http.StatusOK
}

// maxDecodeBytesPerByte bounds what the gateway allocates per byte of a
// body to decode it. Most bodies cost 4 to 10 (reading it, the decode);
// the most are bodies dense with tokens that go through encoding/json's
// tokenizer or decoder: 30 for one dense with escaped keys (the key
// check's slow path), 40 for thousands of one-word messages (each
// message is decoded on its own). All of it but the body and the decoded
// request is garbage when the decode ends; a body refused for its depth
// costs its reading.
const maxDecodeBytesPerByte = 64

// TestDecodeMemoryIsLinear: decoding a body costs memory linear in its
// size, whatever its nesting; a deep one is refused.
func TestDecodeMemoryIsLinear(t *testing.T) {
	g := &urlguard.Guard{}
	const size = 1 << 20
	for name, body := range hostileChatBodies(size) {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, status := decodeAll(g, body)
			runtime.ReadMemStats(&after)
			got := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes allocated for a %d-byte body: %d", got, len(body), status)
			if limit := uint64(maxDecodeBytesPerByte * len(body)); got > limit {
				t.Errorf("decoding allocated %d bytes for a %d-byte body, want at most %d", got, len(body), limit)
			}
			deep := strings.HasPrefix(name, "deep")
			if deep != (status == http.StatusBadRequest) {
				t.Errorf("status %d, want a 400 only for a deep body", status)
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
// most maxDecodeBytesPerByte per byte of it (and a fixed amount for a
// small one), and accepts none nested past strictjson.MaxDepth.
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
		if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(maxDecodeBytesPerByte*len(body)+256<<10); got > limit {
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
