package twin

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// ServiceProxy is the twin's stand-in for a Service's virtual address
// (the twin has no kube-proxy and no cluster DNS): it listens on an
// address of the namespace and hands each connection to the next of its
// backends in turn, as kube-proxy spreads a ClusterIP's connections.
type ServiceProxy struct {
	// Addr is where it listens (host:port).
	Addr     string
	ln       net.Listener
	mu       sync.Mutex
	backends []string
	next     atomic.Uint64
	wg       sync.WaitGroup
}

// StartServiceProxy listens on addr and proxies to backends until the
// test ends.
func StartServiceProxy(tb testing.TB, addr string, backends ...string) *ServiceProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatalf("twin: service proxy on %s: %v", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &ServiceProxy{Addr: ln.Addr().String(), ln: ln, backends: backends}
	p.wg.Add(1)
	go p.serve(ctx)
	tb.Cleanup(func() {
		cancel()
		ln.Close()
		p.wg.Wait()
	})
	return p
}

// SetBackends replaces the backends new connections go to.
func (p *ServiceProxy) SetBackends(backends ...string) {
	p.mu.Lock()
	p.backends = backends
	p.mu.Unlock()
}

func (p *ServiceProxy) serve(ctx context.Context) {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.relay(ctx, conn)
		}()
	}
}

// relay joins conn to the next backend until either side ends or ctx
// does.
func (p *ServiceProxy) relay(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	p.mu.Lock()
	backends := p.backends
	p.mu.Unlock()
	if len(backends) == 0 {
		return
	}
	backend := backends[p.next.Add(1)%uint64(len(backends))]
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", backend)
	if err != nil {
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close(); up.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); closeWrite(conn); done <- struct{}{} }()
	<-done
	<-done
}

// closeWrite half-closes c, so the far side sees the end of what was sent.
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
