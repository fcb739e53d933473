package orchestrator_test

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// cutProxy stands between node agents and a replica, as the network
// does: cut severs every link at once, and while blocked it refuses new
// ones, as a dead network path would.
type cutProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	blocked bool
	conns   map[net.Conn]struct{}
	dials   int // accepted connections, for the reconnect count
	wg      sync.WaitGroup
}

// newCutProxy proxies to the host of the replica's URL.
func newCutProxy(t *testing.T, r *replica) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: strings.TrimPrefix(r.URL, "http://"), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

// wsURL is where agents dial through the proxy.
func (p *cutProxy) wsURL() string { return "ws://" + p.ln.Addr().String() + "/v1/nodes/connect" }

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.blocked {
			p.mu.Unlock()
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			in.Close()
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.dials++
		p.wg.Add(2)
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		go pipe(out, in)
		go pipe(in, out)
	}
}

// cut severs every open link.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// block refuses (true) or lets through (false) new links.
func (p *cutProxy) block(b bool) {
	p.mu.Lock()
	p.blocked = b
	p.mu.Unlock()
}

// dialed returns how many links the proxy has accepted.
func (p *cutProxy) dialed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dials
}

// retarget sends new links to replica r; open links stay where they are,
// as a Service's new connections reach another pod in a rolling restart.
func (p *cutProxy) retarget(r *replica) {
	p.mu.Lock()
	p.target = strings.TrimPrefix(r.URL, "http://")
	p.mu.Unlock()
}
