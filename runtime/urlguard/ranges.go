package urlguard

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// blockedPrefixes are ranges no user-supplied URL may reach, beyond what
// netip classifies (loopback, private, link-local, multicast, unspecified):
// those IANA's special-purpose registries mark not globally reachable, the
// deprecated ones routers inside a site may still route, and the forms that
// carry an IPv4 address to a translator inside.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),         // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),     // carrier-grade NAT, used inside clouds
	netip.MustParsePrefix("192.0.0.0/24"),      // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),      // documentation (TEST-NET-1)
	netip.MustParsePrefix("192.88.99.0/24"),    // 6to4 relay anycast (deprecated): a relay inside may answer
	netip.MustParsePrefix("198.18.0.0/15"),     // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"),   // documentation (TEST-NET-2)
	netip.MustParsePrefix("203.0.113.0/24"),    // documentation (TEST-NET-3)
	netip.MustParsePrefix("240.0.0.0/4"),       // reserved
	netip.MustParsePrefix("fd00:ec2::254/128"), // AWS metadata over IPv6
	netip.MustParsePrefix("64:ff9b::/96"),      // NAT64 can reach IPv4 inside
	netip.MustParsePrefix("64:ff9b:1::/48"),    // NAT64 for local use: the operator's own translator
	netip.MustParsePrefix("::ffff:0:0:0/96"),   // IPv4-translated (SIIT): a translator inside
	netip.MustParsePrefix("::/96"),             // IPv4-compatible (deprecated): automatic tunnels
	netip.MustParsePrefix("100::/64"),          // discard-only
	netip.MustParsePrefix("2001:2::/48"),       // benchmarking
	netip.MustParsePrefix("2001:db8::/32"),     // documentation
	netip.MustParsePrefix("3fff::/20"),         // documentation
	netip.MustParsePrefix("5f00::/16"),         // SRv6 segment ids, routed inside a domain only
	netip.MustParsePrefix("fec0::/10"),         // site-local (deprecated, still routed inside some sites)
}

// checkAddr refuses an address inside the network, and an IPv6 address
// that carries an IPv4 address inside it (embedded). A zone is dropped
// first: a prefix contains no zoned address, and the zone does not change
// where a global address routes.
func checkAddr(a netip.Addr) error {
	a = a.WithZone("").Unmap()
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
	sixToFour = netip.MustParsePrefix("2002::/16")       // 6to4: bits 16–47
	nat64     = netip.MustParsePrefix("64:ff9b::/96")    // NAT64, well-known: last 32 bits
	nat64Loc  = netip.MustParsePrefix("64:ff9b:1::/48")  // NAT64, local use: last 32 bits in a /96
	siit      = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated (SIIT): last 32 bits
	teredo    = netip.MustParsePrefix("2001::/32")       // server: bits 32–63; client: last 32 bits inverted
	compat    = netip.MustParsePrefix("::/96")           // IPv4-compatible (deprecated): last 32 bits
)

// embeddedIPv4 returns the IPv4 addresses an IPv6 address carries in the
// forms that route to them: IPv4-compatible, IPv4-translated, 6to4, NAT64,
// Teredo and ISATAP interface ids (IPv4-mapped addresses were unmapped
// before).
func embeddedIPv4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]}) }
	var out []netip.Addr
	switch {
	case compat.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		out = append(out, v4(12))
	case siit.Contains(a), nat64.Contains(a), nat64Loc.Contains(a):
		out = append(out, v4(12))
	case sixToFour.Contains(a):
		out = append(out, v4(2))
	case teredo.Contains(a):
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		out = append(out, v4(4), client)
	}
	// ISATAP: an interface id of 00-00-5E-FE (u/g bits aside) and an IPv4
	// address, under any prefix; the site's router tunnels to that address.
	if b[8]&^0x03 == 0 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe {
		out = append(out, v4(12))
	}
	return out
}
