package nodeagent

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestCredit(t *testing.T) {
	t.Run("takes what it has, then waits for a grant", func(t *testing.T) {
		c := newCredit(2)
		for i := range 2 {
			if ok, _ := c.take(t.Context(), clock.RealClock{}, time.Hour); !ok {
				t.Fatalf("take %d of an initial 2 failed", i+1)
			}
		}
		got := make(chan bool, 1)
		go func() { ok, _ := c.take(t.Context(), clock.RealClock{}, time.Hour); got <- ok }()
		select {
		case <-got:
			t.Fatal("take returned with no credit left")
		case <-time.After(50 * time.Millisecond):
		}
		c.grant(1)
		if !<-got {
			t.Fatal("take after a grant failed")
		}
	})
	t.Run("gives up when the request ends", func(t *testing.T) {
		c := newCredit(0)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if ok, stalled := c.take(ctx, clock.RealClock{}, time.Hour); ok || stalled {
			t.Fatalf("take = %v, stalled %v without credit after the request ended", ok, stalled)
		}
	})
	t.Run("gives up when no grant comes", func(t *testing.T) {
		c := newCredit(0)
		clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
		type taken struct{ ok, stalled bool }
		got := make(chan taken, 1)
		go func() { ok, stalled := c.take(t.Context(), clk, time.Minute); got <- taken{ok, stalled} }()
		testenv.EventuallyNil(t, 10*time.Second, "take waiting on its stall timer", func() error {
			if !clk.HasWaiters() {
				return errors.New("take is not waiting on its stall timer yet")
			}
			return nil
		})
		clk.Step(time.Minute)
		if r := <-got; r.ok || !r.stalled {
			t.Fatalf("take = %v, stalled %v, want a stall", r.ok, r.stalled)
		}
	})
	t.Run("grants saturate", func(t *testing.T) {
		c := newCredit(5)
		c.grant(math.MaxInt)
		if got, want := c.n, math.MaxInt; got != want {
			t.Fatalf("credit = %d, want %d", got, want)
		}
	})
}

// readChunks reads n chunk frames of id, in seq order from first.
func readChunks(t *testing.T, sc *serverConn, id string, first int64, n int) {
	t.Helper()
	for i := range int64(n) {
		c, ok := sc.next(t).(*nodeproto.Chunk)
		if !ok {
			t.Fatalf("frame %d is not a chunk", i)
		}
		if c.RequestID != id || c.Seq != first+i {
			t.Fatalf("chunk %s #%d, want %s #%d", c.RequestID, c.Seq, id, first+i)
		}
	}
}

// TestWindowHoldsTheStream: a consumer that grants nothing gets exactly
// the window, then exactly what it grants.
func TestWindowHoldsTheStream(t *testing.T) {
	_, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{window: 4, manualCredit: true})
	startAgent(t, fs, eng)
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-w", testModel, eng.served, 40))
	readChunks(t, sc, "req-w", 0, 4)
	sc.quiet(t, 500*time.Millisecond) // 40 tokens take under 100 ms at this speed
	sc.send(t, &nodeproto.Window{RequestID: "req-w", Chunks: 3})
	readChunks(t, sc, "req-w", 4, 3)
	sc.quiet(t, 300*time.Millisecond)
	sc.send(t, &nodeproto.Window{RequestID: "req-w", Chunks: 100})
	seq := int64(7)
	for {
		switch f := sc.next(t).(type) {
		case *nodeproto.Chunk:
			if got, want := f.Seq, seq; got != want {
				t.Fatalf("chunk seq = %d, want %d", got, want)
			}
			seq++
		case *nodeproto.Done:
			if got, want := f.CompletionTokens, int64(40); got != want {
				t.Errorf("done completion_tokens = %d, want %d", got, want)
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

// TestZeroCreditHoldsOnlyItsRequest: a request without credit waits while
// another streams to its end and heartbeats go on.
func TestZeroCreditHoldsOnlyItsRequest(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{window: 2, manualCredit: true})
	startAgent(t, fs, eng)
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-slow", testModel, eng.served, 400))
	readChunks(t, sc, "req-slow", 0, 2)
	sc.send(t, assignFrame("req-fast", testModel, eng.served, 20))
	var fastDone bool
	for !fastDone {
		switch f := sc.next(t).(type) {
		case *nodeproto.Chunk:
			if f.RequestID != "req-fast" {
				t.Fatalf("chunk of %s, which has no credit", f.RequestID)
			}
			sc.send(t, &nodeproto.Window{RequestID: "req-fast", Chunks: 1})
		case *nodeproto.Done:
			if got, want := f.RequestID, "req-fast"; got != want {
				t.Fatalf("done of %s, want %s", got, want)
			}
			if got, want := f.CompletionTokens, int64(20); got != want {
				t.Errorf("req-fast completion_tokens = %d, want %d", got, want)
			}
			fastDone = true
		default:
			t.Fatalf("unexpected %s frame", f.Type())
		}
	}
	if beats := sc.quiet(t, 1500*time.Millisecond); beats == 0 {
		t.Error("no heartbeat while a request waited for credit")
	}
	sc.send(t, &nodeproto.Cancel{RequestID: "req-slow", Reason: "client_gone"})
	d, ok := sc.next(t).(*nodeproto.Done)
	if !ok || d.RequestID != "req-slow" {
		t.Fatalf("after cancel: %v, want req-slow's done", d)
	}
	if got, want := d.FinishReason, openai.FinishAbort; got != want {
		t.Errorf("req-slow finish_reason = %q, want %q", got, want)
	}
	// Two chunks went out (the role, one token); one more event may have
	// been read and held when the credit ran out.
	if got := d.CompletionTokens; got < 1 || got > 2 {
		t.Errorf("req-slow completion_tokens = %d, want 1 or 2", got)
	}
	testenv.Eventually(t, "engine aborts req-slow", func() bool { return sim.Stats().Running == 0 })
}

// TestStalledCreditGivesUpTheRequest: a request whose server stops
// granting credit (its consumer, or the replica relaying to it, is gone)
// is given up after the stall bound: the engine stops, and the done says
// abort with what was sent, instead of the request holding its engine
// slot and the connection forever.
func TestStalledCreditGivesUpTheRequest(t *testing.T) {
	sim, eng := newSim(t)
	fs := newFakeServer(t, fakeOpts{window: 2, manualCredit: true})
	startAgent(t, fs, eng, func(c *Config) { c.creditStall = 200 * time.Millisecond })
	sc := fs.accept(t)
	sc.send(t, assignFrame("req-orphan", testModel, eng.served, 400))
	readChunks(t, sc, "req-orphan", 0, 2)
	d, ok := sc.next(t).(*nodeproto.Done)
	if !ok || d.RequestID != "req-orphan" {
		t.Fatalf("after the stall: %v, want req-orphan's done", d)
	}
	if got, want := d.FinishReason, openai.FinishAbort; got != want {
		t.Errorf("finish_reason = %q, want %q", got, want)
	}
	testenv.Eventually(t, "engine aborts req-orphan", func() bool { return sim.Stats().Running == 0 })
}
