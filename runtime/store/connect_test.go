package store

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// blackHole accepts TCP connections and answers nothing, as a stopped
// PostgreSQL (its kernel still completes handshakes) or a network that
// drops the server's packets does. It returns its address; it stops when
// the test ends.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestConnectToFrozenServerTimesOut: a connection attempt to a server that
// accepts and answers nothing fails after PostgresConnectTimeout, even for
// a caller without a deadline (database/sql opens connections in the
// background with none).
func TestConnectToFrozenServerTimesOut(t *testing.T) {
	addr := blackHole(t)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		db, err := Open(context.Background(), "postgres://u:p@"+addr+"/db?sslmode=disable")
		if err == nil {
			db.Close()
		}
		done <- err
	}()
	// The slack covers a loaded machine; without the timeout the attempt
	// never ends.
	const slack = 10 * time.Second
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Open of a server that answers nothing succeeded")
		}
		if !IsUnavailable(err) {
			t.Errorf("Open: %v, want an outage (IsUnavailable)", err)
		}
		t.Logf("Open gave up after %v: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(PostgresConnectTimeout + slack):
		t.Fatalf("Open of a server that answers nothing still waits after %v", time.Since(start).Round(time.Second))
	}
}
