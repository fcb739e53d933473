package twin

import (
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A port the twin hands a process to listen on must stay free until the
// process binds it. Asking the kernel for port 0 gives one from the
// ephemeral range, which every outgoing connection in the namespace draws
// from too: a client's connection took the port of a KEDA operator that
// had not yet bound it ("bind: address already in use"). So the twin's
// listening ports come from just below that range, where no connection's
// source port ever lands, each handed out once.
var ports struct {
	sync.Mutex
	next, low int
}

// listenPorts is how many ports below the ephemeral range the twin may
// hand out.
const listenPorts = 8000

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > listenPorts+1024 {
				return n
			}
		}
	}
	return 32768 // Linux's default
}

// freeAddr returns host:port with a port below the ephemeral range that
// nothing listens on now, for a process that takes its address as a flag.
func freeAddr(tb testing.TB, host string) string {
	tb.Helper()
	ports.Lock()
	defer ports.Unlock()
	if ports.low == 0 {
		top := ephemeralLow()
		ports.low, ports.next = top-listenPorts, top-listenPorts
	}
	for range listenPorts {
		p := ports.next
		ports.next++
		if ports.next >= ports.low+listenPorts {
			ports.next = ports.low
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		_ = l.Close()
		return addr
	}
	tb.Fatalf("twin: no free port on %s below the ephemeral range", host)
	return ""
}

// freePort returns a loopback port as freeAddr does.
func freePort(tb testing.TB) int {
	tb.Helper()
	_, port, _ := net.SplitHostPort(freeAddr(tb, "127.0.0.1"))
	n, _ := strconv.Atoi(port)
	return n
}
