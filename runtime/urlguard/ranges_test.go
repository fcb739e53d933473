package urlguard

import (
	"context"
	"errors"
	"testing"
)

// modes are the guard's two settings: fail-closed (the default) and local
// mode, where a name that does not resolve passes.
var modes = []struct {
	name  string
	guard *Guard
}{
	{name: "fail-closed", guard: &Guard{Resolver: resolver}},
	{name: "local", guard: &Guard{Resolver: resolver, AllowUnresolvable: true}},
}

// TestReservedRanges: address literals in ranges that are not reachable on
// the Internet, or carry an internal IPv4 address, are refused in every mode;
// public addresses in the same forms pass.
func TestReservedRanges(t *testing.T) {
	tests := []struct {
		url     string
		blocked bool
	}{
		// IPv4-translated (SIIT, ::ffff:0:0:0/96).
		{url: "http://[::ffff:0:7f00:1]/", blocked: true},
		{url: "http://[::ffff:0:127.0.0.1]/", blocked: true},
		{url: "http://[::ffff:0:a9fe:a9fe]/", blocked: true},
		{url: "http://[::ffff:0:5db8:d822]/", blocked: true}, // a public IPv4, through a translator inside
		// IPv4-mapped, in every spelling.
		{url: "http://[::ffff:7f00:1]/", blocked: true},
		{url: "http://[0:0:0:0:0:ffff:a9fe:a9fe]/", blocked: true},
		{url: "http://[::ffff:10.0.0.1]/", blocked: true},
		// Site-local (deprecated, still routed inside some sites).
		{url: "http://[fec0::1]/", blocked: true},
		{url: "http://[fed0::1]/", blocked: true},
		{url: "http://[feff:ffff::1]/", blocked: true},
		// NAT64: the well-known prefix, and the local-use one, which is the operator's.
		{url: "http://[64:ff9b::a00:1]/", blocked: true},
		{url: "http://[64:ff9b::5db8:d822]/", blocked: true},
		{url: "http://[64:ff9b:1::5db8:d822]/", blocked: true},
		{url: "http://[64:ff9b:1:abcd::7f00:1]/", blocked: true},
		// 6to4 and IPv4-compatible.
		{url: "http://[2002:c0a8:101::1]/", blocked: true},
		{url: "http://[2002:a00:1::]/", blocked: true},
		{url: "http://[::10.0.0.1]/", blocked: true},
		{url: "http://[::5db8:d822]/", blocked: true}, // deprecated form, routed by no one on the Internet
		// ISATAP interface ids carrying an internal IPv4.
		{url: "http://[2606:2800:220:1:0:5efe:7f00:1]/", blocked: true},
		{url: "http://[2606:2800:220:1:200:5efe:a9fe:a9fe]/", blocked: true},
		// Discard-only, benchmarking, documentation and SRv6 segment ids.
		{url: "http://[100::1]/", blocked: true},
		{url: "http://[2001:2::1]/", blocked: true},
		{url: "http://[2001:db8::1]/", blocked: true},
		{url: "http://[3fff::1]/", blocked: true},
		{url: "http://[5f00::1]/", blocked: true},
		{url: "http://192.0.2.1/", blocked: true},
		{url: "http://198.51.100.7/", blocked: true},
		{url: "http://203.0.113.9/", blocked: true},
		{url: "http://192.88.99.1/", blocked: true},
		// A zone changes nothing (a prefix contains no zoned address).
		{url: "http://[fec0::1%25eth0]/", blocked: true},
		{url: "http://[64:ff9b::7f00:1%25x]/", blocked: true},
		{url: "http://[2002:7f00:1::%25eth0]/", blocked: true},
		{url: "http://[::ffff:0:7f00:1%25lo]/", blocked: true},
		// Public addresses pass.
		{url: "http://93.184.216.34/"},
		{url: "http://[::ffff:93.184.216.34]/"},
		{url: "http://[2002:5db8:d822::1]/"},
		{url: "http://[2606:2800:220:1:248:1893:25c8:1946]/"},
		{url: "http://[2606:2800:220:1:0:5efe:5db8:d822]/"}, // ISATAP id with a public IPv4
		{url: "http://[2001:4860:4860::8888]/"},
	}
	for _, m := range modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.url, func(t *testing.T) {
				err := m.guard.CheckURL(context.Background(), tt.url)
				if got := errors.Is(err, ErrBlocked); got != tt.blocked {
					t.Errorf("blocked = %v (%v), want %v", got, err, tt.blocked)
				}
			})
		}
	}
}
