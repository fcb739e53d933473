package orchestrator

import (
	"fmt"
	"log/slog"
	"testing"

	dto "github.com/prometheus/client_model/go"

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
	o := &Orchestrator{cfg: Config{Redis: rdb, Logger: slog.New(slog.DiscardHandler), Metrics: NewMetrics(nil)}, keys: registry.NewKeys(env.Prefix)}
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
			o.recordDone(testConn(node), &d, true)
			o.dones.wg.Wait()
		}
		u, ok, err := log.Completion(t.Context(), id)
		if err != nil || !ok || u.PromptTokens != 20 || u.CompletionTokens != 300 {
			t.Errorf("order %v: Completion = %+v, %v, %v; want the retry's 20/300", order, u, ok, err)
		}
	}
}

// testConn is a connection of node with nobody writing its queue.
func testConn(node string) *nodeConn {
	return newNodeConn(nil, nil, registry.NodeRecord{ID: node}, 1, "", func(error) {})
}

// TestDonesAreRecordedAndAcknowledgedInBatches: done frames from two
// nodes, queued while a flush runs, are all recorded, and each node's
// frames are acknowledged on its own connection, in order, one ack frame
// per batch.
func TestDonesAreRecordedAndAcknowledgedInBatches(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	o := &Orchestrator{cfg: Config{Redis: rdb, Logger: slog.New(slog.DiscardHandler), Metrics: NewMetrics(nil)}, keys: registry.NewKeys(env.Prefix)}
	log := NewCompletionLog(rdb, env.Prefix)
	conns := []*nodeConn{testConn("node-a"), testConn("node-b")}
	const n = 600
	// As while a flush is writing: the frames queue up behind it.
	o.dones.running = true
	o.dones.wg.Add(1)
	for i := range n {
		o.recordDone(conns[i%2], &nodeproto.Done{RequestID: fmt.Sprintf("req_%d", i), PromptTokens: 1, CompletionTokens: int64(i),
			FinishReason: openai.FinishStop}, true)
	}
	go o.flushDones()
	o.dones.wg.Wait()
	for i := range n {
		u, ok, err := log.Completion(t.Context(), fmt.Sprintf("req_%d", i))
		if err != nil || !ok || u.CompletionTokens != int64(i) {
			t.Fatalf("req_%d: Completion = %+v, %v, %v", i, u, ok, err)
		}
	}
	if ttl := rdb.TTL(t.Context(), o.keys.Completion("req_0")).Val(); ttl <= 0 || ttl > CompletionTTL {
		t.Errorf("record TTL %v, want within (0, %v]", ttl, CompletionTTL)
	}
	for ci, c := range conns {
		var got []string
		for _, f := range c.queue {
			got = append(got, f.(*nodeproto.Ack).RequestIDs...)
		}
		if len(got) != n/2 {
			t.Fatalf("node %d: %d requests acknowledged, want %d", ci, len(got), n/2)
		}
		for j, id := range got {
			if want := fmt.Sprintf("req_%d", 2*j+ci); id != want {
				t.Fatalf("node %d: ack %d is %s, want %s", ci, j, id, want)
			}
		}
		if want := (n + maxDoneBatch - 1) / maxDoneBatch; len(c.queue) != want {
			t.Errorf("node %d: %d ack frames, want one per batch: %d", ci, len(c.queue), want)
		}
	}
	if o.dones.running || o.dones.pending != nil {
		t.Error("the recorder did not end once idle")
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

// TestDoneRecordedOnlyFromAssignedNode: a done frame that did not find its
// request running on the connection is recorded only when the request was
// assigned to the frame's node, in an earlier batch or the same one; every
// done is acknowledged either way, and each refusal is counted.
func TestDoneRecordedOnlyFromAssignedNode(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	o := &Orchestrator{cfg: Config{Redis: rdb, Logger: slog.New(slog.DiscardHandler), Metrics: NewMetrics(nil)}, keys: registry.NewKeys(env.Prefix)}
	log := NewCompletionLog(rdb, env.Prefix)
	tests := []struct {
		name      string
		assigned  []string // nodes assigned in an earlier batch
		sameBatch string   // node assigned in the done's batch
		from      string
		running   bool
		want      bool
	}{
		{"never assigned", nil, "", "node-b", false, false},
		{"assigned to another node", []string{"node-a"}, "", "node-b", false, false},
		{"assigned, after a cancel", []string{"node-a"}, "", "node-a", false, true},
		{"first attempt of a retry", []string{"node-a", "node-b"}, "", "node-a", false, true},
		{"assigned in the same batch", nil, "node-a", "node-a", false, true},
		{"found running", nil, "", "node-a", true, true},
	}
	refused := 0
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("req_%d", i)
			for _, n := range tt.assigned {
				o.recordAssigned(n, id)
			}
			o.dones.wg.Wait()
			c := testConn(tt.from)
			// As while a flush is writing: the records queue up behind it.
			o.dones.mu.Lock()
			o.dones.running = true
			o.dones.wg.Add(1)
			o.dones.mu.Unlock()
			if tt.sameBatch != "" {
				o.recordAssigned(tt.sameBatch, id)
			}
			o.recordDone(c, &nodeproto.Done{RequestID: id, PromptTokens: 3, CompletionTokens: 4, FinishReason: openai.FinishStop}, tt.running)
			go o.flushDones()
			o.dones.wg.Wait()
			u, ok, err := log.Completion(t.Context(), id)
			if err != nil || ok != tt.want || (ok && u.CompletionTokens != 4) {
				t.Errorf("Completion = %+v, %v, %v; want recorded %v", u, ok, err, tt.want)
			}
			if !tt.want {
				refused++
			}
			if len(c.queue) != 1 || c.queue[0].(*nodeproto.Ack).RequestIDs[0] != id {
				t.Errorf("acks %v, want the done acknowledged", c.queue)
			}
		})
	}
	var m dto.Metric
	if err := o.cfg.Metrics.donesRefused.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != float64(refused) {
		t.Errorf("refused counter %v, want %d", got, refused)
	}
}
