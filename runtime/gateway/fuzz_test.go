package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/strictjson"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

// FuzzRequestPipeline runs a body through what the gateway does before an
// engine sees it: strict decoding, validation, the URL guard and the
// engine body. Nothing panics, and an accepted body reaches the engine as
// a body that decodes exactly (no duplicate or variant keys) to the same
// model, messages and output cap the gateway validated and billed.
func FuzzRequestPipeline(f *testing.F) {
	for _, s := range []string{
		`{"model":"llama-8b","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":1,"max_to` + "\u212a" + `ens":8000,"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"top_k":3,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"a","extra":{"k":1}}],"tools":[{"type":"function","function":{"name":"f"}}]}`,
	} {
		f.Add([]byte(s))
	}
	guard := &urlguard.Guard{Resolver: noDNS{}, AllowUnresolvable: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, refused := decodeRequest(body)
		if refused != nil {
			return
		}
		_ = guard.CheckJSON(context.Background(), body)
		job, err := dispatch.NewJob("req_1", req, 0)
		if err != nil {
			return // a value encoding/json cannot re-encode is refused at dispatch
		}
		out := job.EngineBody("served")
		if err := strictjson.Check(out, requestType); err != nil {
			t.Fatalf("the engine body has ambiguous keys (%v): %s", err, out)
		}
		var got openai.ChatCompletionRequest
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("the engine body does not decode: %v: %s", err, out)
		}
		if got.MaxOutputTokens() != req.MaxOutputTokens() || len(got.Messages) != len(req.Messages) || got.Model != "served" {
			t.Fatalf("the engine reads max %d, %d messages, model %q; the gateway validated max %d, %d messages: %s",
				got.MaxOutputTokens(), len(got.Messages), got.Model, req.MaxOutputTokens(), len(req.Messages), out)
		}
	})
}
