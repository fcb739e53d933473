package nodeagent

import (
	"fmt"
	"slices"
	"testing"

	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestDoneStore(t *testing.T) {
	ids := func(ds []*nodeproto.Done) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.RequestID)
		}
		return out
	}
	tests := []struct {
		name        string
		add         []string
		ack         []string
		want        []string
		wantDropped int64
	}{
		{"under the cap", []string{"a", "b"}, nil, []string{"a", "b"}, 0},
		{"oldest dropped at the cap", []string{"a", "b", "c", "d", "e"}, nil, []string{"c", "d", "e"}, 2},
		{"ack forgets, unknown ignored", []string{"a", "b", "c"}, []string{"b", "zz"}, []string{"a", "c"}, 0},
		{"a repeat replaces and is newest", []string{"a", "b", "a"}, nil, []string{"b", "a"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := newDoneStore(3)
			if err != nil {
				t.Fatal(err)
			}
			var dropped []string
			for _, id := range tt.add {
				if old := s.add(&nodeproto.Done{RequestID: id}); old != nil {
					dropped = append(dropped, old.RequestID)
				}
			}
			s.ack(tt.ack)
			if got := ids(s.snapshot()); !slices.Equal(got, tt.want) {
				t.Errorf("pending = %v, want %v", got, tt.want)
			}
			pending, n := s.counts()
			if pending != len(tt.want) || n != tt.wantDropped || int64(len(dropped)) != tt.wantDropped {
				t.Errorf("counts = %d pending, %d dropped (returned %v), want %d, %d", pending, n, dropped, len(tt.want), tt.wantDropped)
			}
		})
	}
}

// TestDonesReplayedUntilAcked: records wait for an ack; after the server
// drops the socket, the new connection carries the unacknowledged ones
// first, and an acknowledged one never again.
func TestDonesReplayedUntilAcked(t *testing.T) {
	_, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{manualAck: true})
	ag := startAgent(t, fs, eng)
	sc := fs.accept(t)
	dones := map[string]*nodeproto.Done{}
	for i := range 2 {
		id := fmt.Sprintf("req-r%d", i)
		sc.send(t, assignFrame(id, testModel, eng.served, 8))
		for {
			if d, ok := sc.next(t).(*nodeproto.Done); ok {
				dones[id] = d
				break
			}
		}
	}
	testenv.Eventually(t, "2 records pending", func() bool { return ag.a.Stats().PendingDones == 2 })
	sc.send(t, &nodeproto.Ack{RequestIDs: []string{"req-r0"}})
	testenv.Eventually(t, "1 record pending after an ack", func() bool { return ag.a.Stats().PendingDones == 1 })
	sc.c.CloseNow()

	sc = fs.accept(t)
	if got, want := replayed(t, sc), []nodeproto.Done{*dones["req-r1"]}; !slices.Equal(got, want) {
		t.Errorf("replayed %+v, want %+v", got, want)
	}
	sc.send(t, &nodeproto.Ack{RequestIDs: []string{"req-r1"}})
	testenv.Eventually(t, "nothing pending", func() bool { return ag.a.Stats().PendingDones == 0 })
	sc.c.CloseNow()

	sc = fs.accept(t)
	if got := replayed(t, sc); len(got) != 0 {
		t.Errorf("replayed %+v after every ack, want nothing", got)
	}
}

// replayed returns the done frames a new connection sends before its
// first heartbeat: the replay, which precedes everything else.
func replayed(t *testing.T, sc *serverConn) []nodeproto.Done {
	t.Helper()
	var out []nodeproto.Done
	for {
		switch f := sc.nextAny(t).(type) {
		case *nodeproto.Heartbeat:
			return out
		case *nodeproto.Done:
			out = append(out, *f)
		default:
			t.Fatalf("unexpected %s frame before the first heartbeat", f.Type())
		}
	}
}

// TestLinkDropAbortsAndReplays: a dropped link cancels the engine's
// request, and its abort done reaches the next connection.
func TestLinkDropAbortsAndReplays(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	ag := startAgent(t, fs, eng)
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-l", testModel, eng.served, 3000))
	readChunks(t, sc, "req-l", 0, 3)
	sc.c.CloseNow()
	testenv.Eventually(t, "engine aborts the request", func() bool { return sim.Stats().Running == 0 })

	sc = fs.accept(t)
	got := replayed(t, sc)
	if len(got) != 1 {
		t.Fatalf("replayed %+v, want req-l's done", got)
	}
	d := got[0]
	if d.RequestID != "req-l" || d.FinishReason != openai.FinishAbort {
		t.Errorf("replayed %s with finish_reason %q, want req-l with %q", d.RequestID, d.FinishReason, openai.FinishAbort)
	}
	if d.CompletionTokens < 2 || d.CompletionTokens >= 3000 {
		t.Errorf("replayed completion_tokens = %d, want the 2 or more read before the drop, under 3000", d.CompletionTokens)
	}
	testenv.Eventually(t, "the replay is acknowledged", func() bool { return ag.a.Stats().PendingDones == 0 })
}
