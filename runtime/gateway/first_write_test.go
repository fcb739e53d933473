package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/dispatch"
)

// wire records what a response writer sends, one entry per flush: the
// status line if it went out with that flush, then the body bytes.
type wire struct {
	mu      sync.Mutex
	header  http.Header
	status  int
	pending bytes.Buffer
	flushes []string
	flushed chan struct{} // a signal per write, for waitSent
}

func (w *wire) Header() http.Header { return w.header }

func (w *wire) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = code
		w.pending.WriteString("HTTP " + http.StatusText(code) + "\n")
	}
}

func (w *wire) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending.Write(p)
}

func (w *wire) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending.Len() > 0 {
		w.flushes = append(w.flushes, w.pending.String())
		w.pending.Reset()
		select {
		case w.flushed <- struct{}{}:
		default:
		}
	}
}

// waitSent waits until something was written, or fails the test.
func (w *wire) waitSent(t *testing.T, why string) {
	t.Helper()
	select {
	case <-w.flushed:
	case <-time.After(10 * time.Second):
		t.Fatal(why)
	}
}

func newWire() *wire { return &wire{header: http.Header{}, flushed: make(chan struct{}, 1)} }

func (w *wire) sent() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.flushes...)
}

// heldStream gives the events put in its channel, then its end.
type heldStream struct {
	events chan dispatch.Event
}

func (s *heldStream) Recv() (dispatch.Event, error) {
	ev, ok := <-s.events
	if !ok {
		return dispatch.Event{}, io.EOF
	}
	return ev, nil
}

func (s *heldStream) Close() error { return nil }

// readyStream is a heldStream that implements dispatch.Readier.
type readyStream struct{ *heldStream }

func (s readyStream) Ready() bool { return len(s.events) > 0 }

func relayTo(w *wire, st dispatch.Stream) *relay {
	gin.SetMode(gin.ReleaseMode) // as the server sets it
	c, _ := gin.CreateTestContext(w)
	c.Request, _ = http.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	return &relay{c: c, ctx: context.Background(), stream: st, onFirst: func() {}}
}

// TestHeadersGoWithAReadyFirstEvent: when the first event is already there
// (a node's stream: dispatch waits for it), the response headers go out in
// the same write as that event, as a bare reverse proxy sends them; a
// client woken by the headers alone would wait again a moment later.
func TestHeadersGoWithAReadyFirstEvent(t *testing.T) {
	w := newWire()
	st := &heldStream{events: make(chan dispatch.Event, 2)}
	st.events <- dispatch.Event{Data: []byte(`{"id":"a"}`)}
	close(st.events)
	relayTo(w, readyStream{st}).streamed(false)
	got := w.sent()
	if len(got) == 0 || !strings.HasPrefix(got[0], "HTTP OK\n") || !strings.Contains(got[0], `data: {"id":"a"}`) {
		t.Fatalf("first write = %q, want the headers and the first event together", got)
	}
}

// TestEventsAlreadyThereGoInOneWrite: an engine sends its role chunk and
// the first token together; the relay holds a write while the next event
// is already there, so the client gets them in one write too, and each
// event is flushed once nothing more is in hand.
func TestEventsAlreadyThereGoInOneWrite(t *testing.T) {
	w := newWire()
	st := &heldStream{events: make(chan dispatch.Event, 3)}
	st.events <- dispatch.Event{Data: []byte(`{"role":"assistant"}`)}
	st.events <- dispatch.Event{Data: []byte(`{"content":"Hi"}`), Tokens: 1}
	done := make(chan struct{})
	go func() {
		defer close(done)
		relayTo(w, readyStream{st}).streamed(false)
	}()
	w.waitSent(t, "nothing sent while the stream waits for its third event")
	got := w.sent()
	if len(got) != 1 || !strings.HasPrefix(got[0], "HTTP OK\n") || !strings.Contains(got[0], `{"role":"assistant"}`) || !strings.Contains(got[0], `{"content":"Hi"}`) {
		t.Fatalf("writes = %q, want the headers and both events in one", got)
	}
	st.events <- dispatch.Event{Data: []byte(`{"content":" there"}`), Tokens: 1}
	close(st.events)
	<-done
	if got := w.sent(); len(got) < 2 || !strings.Contains(got[1], `{"content":" there"}`) {
		t.Fatalf("writes = %q, want the later event in a write of its own", got)
	}
}

// TestHeadersGoFirstWhenTheEventIsNotThere: a stream whose first event is
// not there yet (or that cannot tell) has its headers sent at once, so the
// client knows the request was accepted during a long prefill.
func TestHeadersGoFirstWhenTheEventIsNotThere(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   func(*heldStream) dispatch.Stream
	}{
		{"not ready", func(h *heldStream) dispatch.Stream { return readyStream{h} }},
		{"cannot tell", func(h *heldStream) dispatch.Stream { return h }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWire()
			st := &heldStream{events: make(chan dispatch.Event, 2)}
			done := make(chan struct{})
			go func() {
				defer close(done)
				relayTo(w, tc.st(st)).streamed(false)
			}()
			w.waitSent(t, "no headers sent while the first event is awaited")
			if got := w.sent(); got[0] != "HTTP OK\n" {
				t.Fatalf("first write = %q, want the headers alone", got[0])
			}
			st.events <- dispatch.Event{Data: []byte(`{"id":"b"}`)}
			close(st.events)
			<-done
			if got := w.sent(); len(got) < 2 || !strings.Contains(got[1], `data: {"id":"b"}`) {
				t.Fatalf("writes = %q, want the event after the headers", got)
			}
		})
	}
}
