package httpserve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve runs a server with limits l for h on loopback and returns its
// address.
func serve(t *testing.T, l Limits, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := l.New(h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// closedByServer reads from conn until the server closes it, for at most
// within; it fails the test if the connection is still open then.
func closedByServer(t *testing.T, conn net.Conn, within time.Duration) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v", within)
	}
}

// patience bounds the waits: far above the limits under test, so only a
// connection that is never closed fails.
const patience = 20 * time.Second

func TestIdleConnectionClosed(t *testing.T) {
	addr := serve(t, Limits{IdleTimeout: 200 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the server closed a keep-alive connection at once; the test shows nothing")
	}
	closedByServer(t, conn, patience) // idle after its request
}

func TestConnectionWithoutRequestClosed(t *testing.T) {
	addr := serve(t, Limits{ReadHeaderTimeout: 200 * time.Millisecond}, http.NotFoundHandler())
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\n") // headers never end
	closedByServer(t, conn, patience)
}

func TestSlowBodyClosed(t *testing.T) {
	got := make(chan error, 1)
	addr := serve(t, Limits{BodyReadTimeout: 200 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		got <- err
		if err != nil {
			http.Error(w, "body too slow", http.StatusRequestTimeout)
		}
	}))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789") // 90 bytes never come
	select {
	case err := <-got:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("the handler's body read ended with %v, want a timeout", err)
		}
	case <-time.After(patience):
		t.Fatal("the handler still reads the slow body")
	}
	closedByServer(t, conn, patience)
}

// TestStreamOutlivesBodyDeadline: once the body has been read, a response
// that streams for longer than the body deadline is not cut.
func TestStreamOutlivesBodyDeadline(t *testing.T) {
	const body = 200 * time.Millisecond
	addr := serve(t, Limits{BodyReadTimeout: body}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc := http.NewResponseController(w)
		for i := range 5 {
			select {
			case <-r.Context().Done():
				return // cut: the client sees fewer lines
			case <-time.After(body):
			}
			fmt.Fprintf(w, "line %d\n", i)
			_ = rc.Flush()
		}
	}))
	resp, err := http.Post("http://"+addr, "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 5 {
		t.Errorf("got %d lines of 5 (%q): the body deadline cut the stream", n, b)
	}
}
