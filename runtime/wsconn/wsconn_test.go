package wsconn

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// pair returns a connected client and server.
func pair(t *testing.T) (client, server *Conn) {
	t.Helper()
	got := make(chan *Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r)
		if err != nil {
			t.Error(err)
			return
		}
		got <- c
	}))
	t.Cleanup(srv.Close)
	client, err := Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"))
	if err != nil {
		t.Fatal(err)
	}
	server = <-got
	t.Cleanup(func() { client.CloseNow(); server.CloseNow() })
	return client, server
}

func TestReadWriteAndConcurrentWriters(t *testing.T) {
	client, server := pair(t)
	var wg sync.WaitGroup
	for i := range 8 { // gorilla allows one writer: the mutex serializes them
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := client.Write(t.Context(), []byte{'a' + byte(i)}); err != nil {
				t.Error(err)
			}
		}()
	}
	seen := map[string]bool{}
	for range 8 {
		msg, err := server.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		seen[string(msg)] = true
	}
	wg.Wait()
	if len(seen) != 8 {
		t.Errorf("got %d distinct messages, want 8", len(seen))
	}
}

func TestReadEndsWithItsContext(t *testing.T) {
	_, server := pair(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := server.Read(ctx)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Read = %v, want the context's cancellation", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Read did not return when its context ended")
	}
	dctx, dcancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer dcancel()
	if _, err := pairRead(t, dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Read past its deadline = %v, want DeadlineExceeded", err)
	}
}

// pairRead reads from a fresh pair's server with ctx.
func pairRead(t *testing.T, ctx context.Context) ([]byte, error) {
	_, server := pair(t)
	return server.Read(ctx)
}

func TestPingWaitsForThePong(t *testing.T) {
	client, server := pair(t)
	go func() { _, _ = server.Read(t.Context()) }() // the server's reader answers pings
	// The client's own reader delivers the pong to Ping.
	go func() { _, _ = client.Read(t.Context()) }()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := client.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	// With nobody reading on the server, no pong comes: Ping fails at its
	// deadline.
	c2, _ := pair(t)
	go func() { _, _ = c2.Read(t.Context()) }()
	short, cancel2 := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel2()
	if err := c2.Ping(short); err == nil {
		t.Error("Ping succeeded with no reader on the other side")
	}
	if err := client.SendPing(time.Second); err != nil {
		t.Errorf("SendPing = %v", err)
	}
}

func TestCloseCarriesItsCode(t *testing.T) {
	client, server := pair(t)
	if err := server.Close(StatusTryAgainLater, "try again later"); err != nil {
		t.Fatal(err)
	}
	_, err := client.Read(t.Context())
	if got := CloseStatus(err); got != StatusTryAgainLater {
		t.Errorf("CloseStatus = %d (%v), want %d", got, err, StatusTryAgainLater)
	}
	if CloseStatus(errors.New("other")) != -1 {
		t.Error("CloseStatus of an unrelated error is not -1")
	}
}

func TestReadLimit(t *testing.T) {
	client, server := pair(t)
	server.SetReadLimit(16)
	if err := client.Write(t.Context(), []byte(strings.Repeat("x", 64))); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Read(t.Context()); err == nil {
		t.Error("a message over the read limit was read")
	}
}
