package gateway

import (
	"testing"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/openai"
)

// BenchmarkClientView is what the client view does to an engine's chunks
// for a client that did not ask for continuous usage: each chunk's usage
// stripped, its model renamed.
func BenchmarkClientView(b *testing.B) {
	b.ReportAllocs()
	view := newClientView(nil, "llama-8b", false)
	events := make([]dispatch.Event, 2)
	for i, e := range oneTokenEvents[:2] {
		events[i] = dispatch.Event{Data: []byte(e.data), Progress: &openai.Usage{PromptTokens: 11}}
	}
	for b.Loop() {
		for _, ev := range events {
			view.show(ev)
		}
	}
}
