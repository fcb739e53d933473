package loadgen

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// lateEndServer streams one token and [DONE], then ends its response only
// after end returns: a server that writes the response's end a moment
// after [DONE] (or never). It counts the connections it accepted.
func lateEndServer(t *testing.T, end func(r *http.Request)) (*httptest.Server, *atomic.Int64) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n"))
		w.(http.Flusher).Flush()
		end(r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// TestStreamKeepsItsConnection: the client reads past [DONE] to the
// response's end, so a server that ends its response a moment after
// [DONE] serves the next request on the same connection.
func TestStreamKeepsItsConnection(t *testing.T) {
	srv, conns := lateEndServer(t, func(r *http.Request) {
		late := time.NewTimer(10 * time.Millisecond) // the end comes after [DONE], not with it
		defer late.Stop()
		select {
		case <-late.C:
		case <-r.Context().Done():
		}
	})
	client := NewClient()
	defer client.CloseIdleConnections()
	for i := range 5 {
		s := stream(context.Background(), client, Target{Name: "t", URL: srv.URL, Model: "m"}, []byte(`{}`))
		if s.err != nil || s.chunks != 1 {
			t.Fatalf("request %d: err %v, %d chunks", i, s.err, s.chunks)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 requests in turn opened %d connections, want 1", n)
	}
}

// TestStreamEndsWhenTheResponseDoesNot: a server that never ends its
// response after [DONE] does not hold the request: it ends once drainWait
// has passed, measured and without an error.
func TestStreamEndsWhenTheResponseDoesNot(t *testing.T) {
	srv, _ := lateEndServer(t, func(r *http.Request) { <-r.Context().Done() })
	client := NewClient()
	defer client.CloseIdleConnections()
	s := stream(context.Background(), client, Target{Name: "t", URL: srv.URL, Model: "m"}, []byte(`{}`))
	if s.err != nil || s.chunks != 1 || s.ttft <= 0 {
		t.Fatalf("err %v, %d chunks, ttft %v", s.err, s.chunks, s.ttft)
	}
}
