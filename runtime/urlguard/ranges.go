package urlguard

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// blockedPrefixes are ranges no user-supplied URL may reach, beyond what
// netip classifies (loopback, private, link-local, multicast, unspecified).
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),         // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),     // carrier-grade NAT, used inside clouds
	netip.MustParsePrefix("192.0.0.0/24"),      // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),     // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),       // reserved
	netip.MustParsePrefix("fd00:ec2::254/128"), // AWS metadata over IPv6
	netip.MustParsePrefix("64:ff9b::/96"),      // NAT64 can reach IPv4 inside
}

// checkAddr refuses an address inside the network, and an IPv6 address
// that carries an IPv4 address inside it (embedded).
func checkAddr(a netip.Addr) error {
	a = a.Unmap()
	for _, v4 := range embeddedIPv4(a) {
		if err := checkAddr(v4); err != nil {
			var be *BlockedError
			if errors.As(err, &be) {
				be.Reason = fmt.Sprintf("%s embeds %s", a, be.Reason)
			}
			return err
		}
	}
	switch {
	case a.IsLoopback():
		return &BlockedError{Reason: fmt.Sprintf("%s is a loopback address", a)}
	case a.IsPrivate():
		return &BlockedError{Reason: fmt.Sprintf("%s is a private address", a)}
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return &BlockedError{Reason: fmt.Sprintf("%s is link-local (cloud metadata lives there)", a)}
	case a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast():
		return &BlockedError{Reason: fmt.Sprintf("%s is not a unicast address", a)}
	}
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return &BlockedError{Reason: fmt.Sprintf("%s is in reserved range %s", a, p)}
		}
	}
	return nil
}

// internalName reports host names that are internal by their form alone.
func internalName(host string) bool {
	switch host {
	case "localhost", "metadata", "metadata.google.internal", "instance-data":
		return true
	}
	for _, suffix := range []string{".localhost", ".internal", ".local", ".localdomain", ".svc", ".cluster.local", ".home.arpa"} {
		if strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return !strings.Contains(host, ".") // a bare name resolves through the search path: inside
}

// parseIPLoose parses an IP literal in every form a resolver or a URL
// library might accept: dotted quad, IPv6 in brackets, and the legacy
// inet_aton forms (2130706433, 0x7f.1, 0177.0.0.1) that attackers use to
// slip past naive checks.
func parseIPLoose(host string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return a, true
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 0, 32) // base 0: 0x.. hex, 0.. octal
		if err != nil {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	var v uint64
	switch len(nums) {
	case 1:
		v = nums[0]
	case 2:
		v = nums[0]<<24 | nums[1]
	case 3:
		v = nums[0]<<24 | nums[1]<<16 | nums[2]
	case 4:
		v = nums[0]<<24 | nums[1]<<16 | nums[2]<<8 | nums[3]
	}
	if v > 0xFFFFFFFF {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// Prefixes of IPv6 forms that carry an IPv4 address.
var (
	sixToFour = netip.MustParsePrefix("2002::/16")      // 6to4: bits 16–47
	nat64     = netip.MustParsePrefix("64:ff9b::/96")   // NAT64, well-known: last 32 bits
	nat64Loc  = netip.MustParsePrefix("64:ff9b:1::/48") // NAT64, local use: last 32 bits
	teredo    = netip.MustParsePrefix("2001::/32")      // server: bits 32–63; client: last 32 bits inverted
	compat    = netip.MustParsePrefix("::/96")          // IPv4-compatible (deprecated): last 32 bits
)

// embeddedIPv4 returns the IPv4 addresses an IPv6 address carries in the
// forms that route to them: IPv4-compatible, 6to4, NAT64 and Teredo
// (IPv4-mapped addresses were unmapped before).
func embeddedIPv4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]}) }
	switch {
	case compat.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		return []netip.Addr{v4(12)}
	case sixToFour.Contains(a):
		return []netip.Addr{v4(2)}
	case nat64.Contains(a), nat64Loc.Contains(a):
		return []netip.Addr{v4(12)}
	case teredo.Contains(a):
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{v4(4), client}
	}
	return nil
}
