package orchestrator

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// nopLink is a link that sends nothing.
type nopLink struct{}

func (nopLink) grant(string, int)    {}
func (nopLink) abort(string, string) {}

// TestWaitKeepsTheOrder: Wait takes the next frame ahead without losing or
// reordering anything: Recv after Wait returns what Recv alone would, a
// failure after buffered chunks still comes after them, and Wait blocks
// until there is something to take.
func TestWaitKeepsTheOrder(t *testing.T) {
	chunk := func(seq int64) *nodeproto.Chunk {
		return &nodeproto.Chunk{RequestID: "r", Seq: seq, Delta: []byte(`{"choices":[{"delta":{"content":"x"}}]}`)}
	}
	s := newReqStream("r", "n", 1, 8, nopLink{}, func() {})
	s.push(chunk(0))
	s.push(chunk(1))
	s.fail(errGone)
	for i := range 2 {
		s.Wait()
		s.Wait() // a second Wait takes nothing more
		if ev, err := s.Recv(); err != nil || ev.Tokens != 1 {
			t.Fatalf("event %d = %+v, %v; want the chunk", i, ev, err)
		}
	}
	s.Wait()
	if _, err := s.Recv(); !errors.Is(err, dispatch.ErrStreamBroken) {
		t.Fatalf("after the chunks: %v, want the stream broken", err)
	}

	s = newReqStream("r2", "n", 1, 8, nopLink{}, func() {})
	waited := make(chan struct{})
	go func() {
		s.Wait()
		close(waited)
	}()
	select {
	case <-waited:
		t.Fatal("Wait returned with nothing to take")
	case <-time.After(50 * time.Millisecond): // a pause, not a deadline: Wait must still be blocked after it
	}
	s.push(&nodeproto.Done{RequestID: "r2", FinishReason: "stop"})
	<-waited
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("after done: %v, want io.EOF", err)
	}
}
