package twin

import (
	"net"
	"strconv"
	"testing"
)

// TestListenPortsAreNeverSourcePorts: the ports the twin hands its
// processes lie below the kernel's ephemeral range, from which outgoing
// connections take their source ports, and none is handed out twice.
func TestListenPortsAreNeverSourcePorts(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		_, p, err := net.SplitHostPort(freeAddr(t, "127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(p)
		if n >= low || n < low-listenPorts {
			t.Fatalf("port %d outside [%d, %d)", n, low-listenPorts, low)
		}
		if seen[n] {
			t.Fatalf("port %d handed out twice", n)
		}
		seen[n] = true
	}
	c, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := c.Addr().(*net.TCPAddr).Port; n < low {
		t.Fatalf("the kernel's own choice %d lies below %d: the range read is wrong", n, low)
	}
}
