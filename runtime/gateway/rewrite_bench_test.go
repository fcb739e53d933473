package gateway

import (
	"testing"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/engineclient"
)

// BenchmarkClientView is what the client view does to an engine's chunks
// for a client that did not ask for continuous usage: each chunk's usage
// stripped, its model renamed, where the orchestrator's parse located them.
func BenchmarkClientView(b *testing.B) {
	b.ReportAllocs()
	view := newClientView(nil, "llama-8b", false)
	events := make([]dispatch.Event, 2)
	for i, e := range oneTokenEvents[:2] {
		events[i] = engineclient.ParseEvent([]byte(e.data))
		if events[i].Progress == nil {
			b.Fatalf("event %d has no running usage: %s", i, e.data)
		}
	}
	for b.Loop() {
		for i := range events {
			view.shown(&events[i], nil)
		}
	}
}
