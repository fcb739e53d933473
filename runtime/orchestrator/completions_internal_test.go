package orchestrator

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestRetryRecordSurvivesLateFirst: the done record of a retry is not
// overwritten by a late record from the first attempt's node, in either
// order of arrival.
func TestRetryRecordSurvivesLateFirst(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	o := &Orchestrator{cfg: Config{Redis: rdb, Logger: slog.New(slog.DiscardHandler)}, keys: registry.NewKeys(env.Prefix)}
	log := NewCompletionLog(rdb, env.Prefix)
	retry := &nodeproto.Done{RequestID: "req_retry", PromptTokens: 20, CompletionTokens: 300, FinishReason: openai.FinishStop}
	late := &nodeproto.Done{RequestID: "req_retry", FinishReason: openai.FinishAbort}
	for i, order := range [][]string{{"node-2", "node-1"}, {"node-1", "node-2"}} {
		id := fmt.Sprintf("req_%d", i)
		for _, node := range order {
			d := *late
			if node == "node-2" {
				d = *retry
			}
			d.RequestID = id
			o.recordDone(t.Context(), node, &d)
		}
		u, ok, err := log.Completion(t.Context(), id)
		if err != nil || !ok || u.PromptTokens != 20 || u.CompletionTokens != 300 {
			t.Errorf("order %v: Completion = %+v, %v, %v; want the retry's 20/300", order, u, ok, err)
		}
	}
}

func TestBestRecord(t *testing.T) {
	retry := completion{PromptTokens: 20, CompletionTokens: 300, FinishReason: openai.FinishStop, NodeID: "node-2"}
	lateFirst := completion{PromptTokens: 0, CompletionTokens: 0, FinishReason: openai.FinishAbort, NodeID: "node-1"}
	abortLonger := completion{PromptTokens: 0, CompletionTokens: 500, FinishReason: openai.FinishAbort, NodeID: "node-1"}
	broken := completion{PromptTokens: 0, CompletionTokens: 40, FinishReason: "", NodeID: "node-3"}
	tests := []struct {
		name string
		recs []completion
		want completion
	}{
		{"one record", []completion{retry}, retry},
		{"retry, then a late first", []completion{retry, lateFirst}, retry},
		{"a late first, then the retry", []completion{lateFirst, retry}, retry},
		{"a finished answer over a longer abort", []completion{abortLonger, retry}, retry},
		{"more output among unfinished", []completion{broken, lateFirst}, broken},
		{"ties by node id", []completion{{CompletionTokens: 1, NodeID: "b"}, {CompletionTokens: 1, NodeID: "a"}}, completion{CompletionTokens: 1, NodeID: "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := best(tt.recs); got != tt.want {
				t.Errorf("best = %+v, want %+v", got, tt.want)
			}
		})
	}
}
