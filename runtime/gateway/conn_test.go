package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/httpserve"
)

// TestIdleAndSlowConnectionsClosed: the gateway's listener closes a
// keep-alive connection left idle, one whose headers never end, and one
// whose body trickles, each without a credential (issue: 3,000 idle
// connections were held for minutes).
func TestIdleAndSlowConnectionsClosed(t *testing.T) {
	s := newStack(t, stackOpts{})
	lim, q := s.quotas()
	const short = 300 * time.Millisecond
	gw, err := gateway.New(gateway.Config{Dispatcher: s.direct, Catalog: gateway.StaticCatalog{}, Auth: denyAll{}, Limits: lim, Queue: q, Ledger: s.led,
		ConnLimits: httpserve.Limits{ReadHeaderTimeout: short, BodyReadTimeout: short, IdleTimeout: short}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOn(t, gw)
	dial := func(t *testing.T) net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	// closed reads until the gateway closes conn; patience only bounds a
	// connection that is never closed.
	closed := func(t *testing.T, conn net.Conn) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err := io.Copy(io.Discard, conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the gateway kept the connection open")
		}
	}
	t.Run("idle keep-alive", func(t *testing.T) {
		conn := dial(t)
		fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("healthz = %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
		}
		closed(t, conn)
	})
	t.Run("headers never end", func(t *testing.T) {
		conn := dial(t)
		fmt.Fprint(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n")
		closed(t, conn)
	})
	t.Run("slow body", func(t *testing.T) {
		conn := dial(t)
		fmt.Fprint(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
		closed(t, conn)
	})
}

// serveOn serves gw with Serve on a loopback port until the test ends and
// returns the address.
func serveOn(t *testing.T, gw *gateway.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}
