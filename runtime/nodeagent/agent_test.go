package nodeagent

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestRegisterThenWelcome(t *testing.T) {
	_, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	startAgent(t, fs, eng)
	sc := fs.accept(t)
	if got, want := sc.register.NodeID, "node-test-1"; got != want {
		t.Errorf("register node_id = %q, want %q", got, want)
	}
	if got, want := string(sc.register.Token), "nt_secret"; got != want {
		t.Errorf("register token = %q, want %q", got, want)
	}
	if got, want := len(sc.register.Models), 1; got != want {
		t.Fatalf("register models = %d, want %d", got, want)
	}
	hb, ok := sc.nextAny(t).(*nodeproto.Heartbeat)
	if !ok {
		t.Fatal("first frame after welcome is not a heartbeat")
	}
	if got, want := hb.Models, []string{testModel}; len(got) != 1 || got[0] != want[0] {
		t.Errorf("heartbeat models = %v, want %v", got, want)
	}
}

func TestAssignStreamsChunksThenDone(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	startAgent(t, fs, eng)
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-1", testModel, sim.ServedModelName(), 24))
	var want int64
	var usage *openai.Usage
	for {
		switch f := sc.next(t).(type) {
		case *nodeproto.Chunk:
			if f.Seq != want {
				t.Fatalf("chunk seq = %d, want %d", f.Seq, want)
			}
			want++
			if ev := engineclient.ParseEvent(f.Delta); ev.Usage != nil {
				usage = ev.Usage
			}
		case *nodeproto.Done:
			if usage == nil {
				t.Fatal("done before the usage chunk")
			}
			if got, want := f.PromptTokens, usage.PromptTokens; got != want {
				t.Errorf("done prompt_tokens = %d, want %d", got, want)
			}
			if got, want := f.CompletionTokens, usage.CompletionTokens; got != want {
				t.Errorf("done completion_tokens = %d, want %d", got, want)
			}
			if got, want := f.CompletionTokens, sim.Stats().GenerationTokens; got != want {
				t.Errorf("done completion_tokens = %d, simulator generated %d", got, want)
			}
			if got, want := f.FinishReason, openai.FinishLength; got != want {
				t.Errorf("done finish_reason = %q, want %q", got, want)
			}
			return
		default:
			t.Fatalf("unexpected %s frame", f.Type())
		}
	}
}

func TestAssignRefused(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	startAgent(t, fs, eng)
	sc := fs.accept(t)
	tests := []struct {
		name     string
		assign   *nodeproto.Assign
		status   int
		wantBody bool
	}{
		{"unknown model", assignFrame("req-a", "other-model", sim.ServedModelName(), 8), http.StatusNotFound, false},
		{"engine refuses", assignFrame("req-b", testModel, sim.ServedModelName(), 1<<30), http.StatusBadRequest, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc.send(t, tt.assign)
			e, ok := sc.next(t).(*nodeproto.Error)
			if !ok {
				t.Fatal("answer is not an error frame")
			}
			if got, want := e.RequestID, tt.assign.RequestID; got != want {
				t.Errorf("error request_id = %q, want %q", got, want)
			}
			if got, want := e.Status, tt.status; got != want {
				t.Errorf("error status = %d, want %d", got, want)
			}
			if got, want := len(e.Body) > 0, tt.wantBody; got != want {
				t.Errorf("error has body = %v, want %v", got, want)
			}
		})
	}
}

func TestCancelAbortsEngineStream(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	startAgent(t, fs, eng)
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-c", testModel, sim.ServedModelName(), 3000))
	if _, ok := sc.next(t).(*nodeproto.Chunk); !ok {
		t.Fatal("first answer is not a chunk")
	}
	if got, want := sim.Stats().Running, 1; got != want {
		t.Fatalf("simulator running = %d, want %d", got, want)
	}
	sc.send(t, &nodeproto.Cancel{RequestID: "req-c", Reason: "client_gone"})
	for {
		f := sc.next(t)
		if d, ok := f.(*nodeproto.Done); ok {
			if got, want := d.FinishReason, openai.FinishAbort; got != want {
				t.Errorf("done finish_reason = %q, want %q", got, want)
			}
			break
		}
		if _, ok := f.(*nodeproto.Chunk); !ok {
			t.Fatalf("unexpected %s frame after cancel", f.Type())
		}
	}
	testenv.EventuallyNil(t, waitFor, "the simulator to stop the cancelled request", func() error {
		if n := sim.Stats().Running; n != 0 {
			return fmt.Errorf("%d running", n)
		}
		return nil
	})
}

// TestConcurrentStreamsKeepTheirOrder: many requests streaming at once
// send their frames both through the writer's queue and, when it is empty,
// straight from their own goroutines; each request's chunks still reach
// the server in order, all before its done.
func TestConcurrentStreamsKeepTheirOrder(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{})
	startAgent(t, fs, eng)
	sc := fs.accept(t)
	const n, tokens = 16, 60
	for i := range n {
		sc.send(t, assignFrame(fmt.Sprintf("req-%d", i), testModel, sim.ServedModelName(), tokens))
	}
	next := map[string]int64{}
	done := map[string]bool{}
	for len(done) < n {
		switch f := sc.next(t).(type) {
		case *nodeproto.Chunk:
			if done[f.RequestID] {
				t.Fatalf("chunk %d of %s after its done", f.Seq, f.RequestID)
			}
			if f.Seq != next[f.RequestID] {
				t.Fatalf("%s: chunk seq %d, want %d", f.RequestID, f.Seq, next[f.RequestID])
			}
			next[f.RequestID]++
		case *nodeproto.Done:
			if f.CompletionTokens != tokens {
				t.Errorf("%s: done with %d completion tokens, want %d", f.RequestID, f.CompletionTokens, tokens)
			}
			done[f.RequestID] = true
		default:
			t.Fatalf("unexpected %s frame", f.Type())
		}
	}
}
