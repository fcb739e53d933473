package urlguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"golang.org/x/net/idna"
)

// lookupProfiles map a host as IDNA-aware fetchers do before they read it
// as an address or look it up (UTS #46): non-transitionally, as WHATWG URL
// parsers and libidn2 do, and transitionally, as libidn2's fallback and
// IDNA2003 libraries do. Both are as lenient as a WHATWG parser: no STD3
// rules, hyphen or length checks. "１２７.0.0.１" and "①②⑦.0.0.1" map to
// "127.0.0.1".
var lookupProfiles = []*idna.Profile{lenientProfile(false), lenientProfile(true)}

func lenientProfile(transitional bool) *idna.Profile {
	return idna.New(idna.MapForLookup(), idna.Transitional(transitional),
		idna.StrictDomainName(false), idna.CheckHyphens(false), idna.VerifyDNSLength(false))
}

// checkHost refuses a host (name or address literal) inside the network,
// in every form a fetcher may read it in: as written, and mapped by UTS #46.
// A name is resolved in each of its forms; a host that does not map to a
// valid name is refused, as WHATWG parsers refuse it.
func (g *Guard) checkHost(ctx context.Context, host string) error {
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return &BlockedError{Reason: "URL has no host"}
	}
	if addr, ok := parseIPLoose(host); ok {
		return checkAddr(addr)
	}
	forms, mapErr := hostForms(host)
	for _, f := range forms {
		if err := checkForm(host, f); err != nil {
			return err
		}
	}
	if mapErr != nil {
		return &BlockedError{Reason: fmt.Sprintf("host %q is not a valid host name: %v", host, mapErr)}
	}
	for _, f := range forms {
		if _, ok := parseIPLoose(f); ok {
			continue // checked above; nothing to resolve
		}
		if err := g.checkResolved(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// hostForms returns host as written and as each lookup profile maps it,
// without a trailing dot and without repeats, and the first mapping error.
// A profile's output is kept even when it errs: it is what a lenient
// fetcher would use.
func hostForms(host string) ([]string, error) {
	forms := []string{host}
	var firstErr error
	for _, p := range lookupProfiles {
		mapped, err := p.ToASCII(host)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		mapped = strings.TrimSuffix(mapped, ".")
		dup := false
		for _, f := range forms {
			dup = dup || f == mapped
		}
		if !dup {
			forms = append(forms, mapped)
		}
	}
	return forms, firstErr
}

// checkForm refuses one form of host that is internal by its form alone:
// an internal address literal, an internal name, or characters no host may
// carry (those a mapping makes of "／", "：" or "［").
func checkForm(host, form string) error {
	mapped := ""
	if form != host {
		mapped = fmt.Sprintf("host %q reads as %q to IDNA-aware fetchers: ", host, form)
	}
	if form == "" {
		return &BlockedError{Reason: mapped + "URL has no host"}
	}
	if addr, ok := parseIPLoose(form); ok {
		err := checkAddr(addr)
		var be *BlockedError
		if errors.As(err, &be) {
			be.Reason = mapped + be.Reason
		}
		return err
	}
	if i := strings.IndexFunc(form, forbiddenInHost); i >= 0 {
		return &BlockedError{Reason: fmt.Sprintf("%shost %q carries %q, which no host may", mapped, form, form[i])}
	}
	if internalName(form) {
		return &BlockedError{Reason: fmt.Sprintf("%shost %q is internal", mapped, form)}
	}
	return nil
}

// forbiddenInHost reports WHATWG's forbidden domain code points: a parser
// refuses a host that holds one, and a fetcher that does not would read
// the host some other way than we do.
func forbiddenInHost(r rune) bool {
	return r <= 0x20 || r == 0x7f || strings.ContainsRune("#%/:<>?@[\\]^|", r)
}

func (g *Guard) checkResolved(ctx context.Context, host string) error {
	r := g.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		if g.AllowUnresolvable {
			return nil
		}
		return &BlockedError{Reason: fmt.Sprintf("host %q could not be resolved to check it", host)}
	}
	for _, a := range addrs {
		if err := checkAddr(a); err != nil {
			var be *BlockedError
			if errors.As(err, &be) {
				be.Reason = fmt.Sprintf("host %q resolves to %s", host, be.Reason)
			}
			return err
		}
	}
	return nil
}
