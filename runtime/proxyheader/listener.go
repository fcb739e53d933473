package proxyheader

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/pires/go-proxyproto"

	"github.com/llmplat/llmplat/runtime/httpserve"
)

// ErrUntrusted is a PROXY header from an address outside the trusted
// prefixes: the connection is closed at its first read.
var ErrUntrusted = proxyproto.ErrSuperfluousProxyHeader

// Listen returns ln reading PROXY headers from the trusted prefixes only
// (see the package comment); with no prefix it returns ln as it is, and no
// header is read from anyone.
func Listen(ln net.Listener, trusted []netip.Prefix) net.Listener {
	if len(trusted) == 0 {
		return ln
	}
	return &proxyproto.Listener{
		Listener:          ln,
		ReadHeaderTimeout: httpserve.ReadHeaderTimeout,
		ConnPolicy: func(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
			if fromTrusted(o.Upstream, trusted) {
				return proxyproto.USE, nil
			}
			return proxyproto.REJECT, nil
		},
	}
}

// fromTrusted reports whether addr is within one of the prefixes.
func fromTrusted(addr net.Addr, trusted []netip.Prefix) bool {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return false
	}
	ip = ip.Unmap()
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ParsePrefixes reads a comma-separated list of CIDR prefixes (a bare
// address is its own /32 or /128), as a flag gives them; empty is none.
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("proxy protocol source %q: want a CIDR prefix: %w", f, err)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		if p.Masked() != p {
			return nil, fmt.Errorf("proxy protocol source %q has host bits set (did you mean %s?)", f, p.Masked())
		}
		if p.Bits() == 0 {
			return nil, errors.New("proxy protocol source " + f + " trusts every address: any client could claim any other's")
		}
		out = append(out, p)
	}
	return out, nil
}
