package testenv

import (
	"net"
	"sync"
	"testing"
)

// FaultProxy forwards TCP to a server (PostgreSQL, Redis) and lets a test
// break the path the way outages do: Freeze stops bytes both ways while
// connections stay open (a stopped process, a network that drops packets
// silently); Cut closes every connection and refuses new ones (a server
// that went down). Clients dial Addr instead of the server.
type FaultProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	down   bool          // cut: connections closed, new ones refused
	thaw   chan struct{} // closed when the proxy thaws
	conns  []net.Conn
	wg     sync.WaitGroup
}

// NewFaultProxy starts a proxy to target (host:port); it stops when the
// test ends.
func NewFaultProxy(tb testing.TB, target string) *FaultProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &FaultProxy{ln: ln, target: target, thaw: make(chan struct{})}
	close(p.thaw)
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *FaultProxy) Addr() string { return p.ln.Addr().String() }

func (p *FaultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

// pipe copies src to dst, holding each read while frozen.
func (p *FaultProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			thaw := p.thaw
			p.mu.Unlock()
			<-thaw
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Freeze holds every byte until Thaw; connections stay open.
func (p *FaultProxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		p.frozen, p.thaw = true, make(chan struct{})
	}
}

// Thaw lets the held bytes and new ones flow again.
func (p *FaultProxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen {
		p.frozen = false
		close(p.thaw)
	}
}

// Cut closes every connection and refuses new ones until Restore.
func (p *FaultProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore accepts connections again after Cut.
func (p *FaultProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *FaultProxy) close() {
	p.Thaw()
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
