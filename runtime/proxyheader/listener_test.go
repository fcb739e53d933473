package proxyheader_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/llmplat/llmplat/runtime/proxyheader"
)

// ioTimeout bounds one read or write of the test's own connections.
const ioTimeout = 10 * time.Second

// seen is what the server side of one connection saw: its remote address
// as the listener reports it, its first line, or the read's error.
type seen struct {
	remote string
	line   string
	err    error
}

// serveOnce accepts one connection on ln and reports what it saw.
func serveOnce(t *testing.T, ln net.Listener) <-chan seen {
	t.Helper()
	out := make(chan seen, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			out <- seen{err: err}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(ioTimeout))
		line, err := bufio.NewReader(c).ReadString('\n')
		// RemoteAddr after the first read: the header has been read then.
		out <- seen{remote: c.RemoteAddr().String(), line: line, err: err}
	}()
	return out
}

// dialFrom connects to ln from the loopback address src and writes header
// (if any) and a line.
func dialFrom(t *testing.T, ln net.Listener, src string, header *proxyproto.Header) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: ioTimeout}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	if header != nil {
		if _, err := header.WriteTo(c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
}

// TestListen: a header from a trusted address names the client; a trusted
// address may also connect without one (the kubelet's probes), and the
// load balancer's health checks (the LOCAL command) keep its own address;
// a header from anywhere else is refused before a byte of the request is
// read; with no trusted address nothing is read as a header.
func TestListen(t *testing.T) {
	client := &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 40000}
	proxied := func(dst net.Addr) *proxyproto.Header { return proxyproto.HeaderProxyFromAddrs(2, client, dst) }
	local := func(net.Addr) *proxyproto.Header {
		return &proxyproto.Header{Version: 2, Command: proxyproto.LOCAL, TransportProtocol: proxyproto.UNSPEC}
	}
	tests := []struct {
		name    string
		trusted []netip.Prefix
		src     string
		header  func(dst net.Addr) *proxyproto.Header
		// wantHost is the remote host the server sees; "" wants the read
		// refused with proxyheader.ErrUntrusted.
		wantHost string
	}{
		{name: "header from the load balancer", trusted: prefixes("127.0.0.2/32"), src: "127.0.0.2", header: proxied, wantHost: "203.0.113.7"},
		{name: "no header from the load balancer's subnet", trusted: prefixes("127.0.0.2/32"), src: "127.0.0.2", wantHost: "127.0.0.2"},
		{name: "health check", trusted: prefixes("127.0.0.2/32"), src: "127.0.0.2", header: local, wantHost: "127.0.0.2"},
		{name: "header from another address", trusted: prefixes("127.0.0.2/32"), src: "127.0.0.3", header: proxied},
		{name: "no header from another address", trusted: prefixes("127.0.0.2/32"), src: "127.0.0.3", wantHost: "127.0.0.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := proxyheader.Listen(raw, tt.trusted)
			t.Cleanup(func() { ln.Close() })
			got := serveOnce(t, ln)
			var h *proxyproto.Header
			if tt.header != nil {
				h = tt.header(raw.Addr())
			}
			dialFrom(t, ln, tt.src, h)
			s := <-got
			if tt.wantHost == "" {
				if !errors.Is(s.err, proxyheader.ErrUntrusted) || s.line != "" {
					t.Errorf("read %q, %v; want the connection refused with ErrUntrusted", s.line, s.err)
				}
				return
			}
			host, _, _ := net.SplitHostPort(s.remote)
			if s.err != nil || host != tt.wantHost || s.line != "GET / HTTP/1.1\r\n" {
				t.Errorf("remote %s, read %q, %v; want %s and the request line", s.remote, s.line, s.err, tt.wantHost)
			}
		})
	}
}

// TestListenWithoutTrustReadsNoHeader: with no trusted prefix the listener
// is the plain one, so a header is the request's first bytes, as before.
func TestListenWithoutTrustReadsNoHeader(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := proxyheader.Listen(raw, nil)
	t.Cleanup(func() { ln.Close() })
	if ln != raw {
		t.Fatalf("Listen with no trusted prefix wrapped the listener (%T)", ln)
	}
}

func TestParsePrefixes(t *testing.T) {
	tests := []struct {
		in, want string // want "" is an error
	}{
		{in: "", want: "[]"},
		{in: "10.0.96.0/20, 10.0.112.0/20", want: "[10.0.96.0/20 10.0.112.0/20]"},
		{in: "10.0.0.7", want: "[10.0.0.7/32]"},
		{in: "2001:db8::/32", want: "[2001:db8::/32]"},
		{in: "10.0.0.1/8"},
		{in: "0.0.0.0/0"},
		{in: "::/0"},
		{in: "lb.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := proxyheader.ParsePrefixes(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Errorf("ParsePrefixes(%q) = %v, want an error", tt.in, got)
				}
				return
			}
			s := "[" + strings.Join(strs(got), " ") + "]"
			if err != nil || s != tt.want {
				t.Errorf("ParsePrefixes(%q) = %s, %v; want %s", tt.in, s, err, tt.want)
			}
		})
	}
}

func prefixes(list string) []netip.Prefix {
	p, err := proxyheader.ParsePrefixes(list)
	if err != nil {
		panic(err)
	}
	return p
}

func strs(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
