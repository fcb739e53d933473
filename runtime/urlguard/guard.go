package urlguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// ResolveTimeout bounds one host lookup: admission must stay fast, and a
// name that does not resolve quickly is refused rather than waited for.
const ResolveTimeout = 2 * time.Second

// MaxURLs bounds how many URLs one body may name; more is an abuse.
const MaxURLs = 64

// Resolver looks up a host's addresses; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard checks request bodies for URLs that point inside the network.
type Guard struct {
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
	// AllowUnresolvable lets a name that does not resolve pass. Off by
	// default: a name we cannot check is refused (fail closed).
	AllowUnresolvable bool
}

// ErrBlocked is wrapped by every refusal, with the offending URL's field.
var ErrBlocked = errors.New("urlguard: url not allowed")

// BlockedError says which URL was refused and why.
type BlockedError struct {
	Path   string // JSON path of the field, "messages[0].content[1].image_url.url"
	Reason string
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("%s: %s", e.Path, e.Reason)
}

func (e *BlockedError) Unwrap() error { return ErrBlocked }

// CheckJSON walks every string of a JSON document and refuses the first
// one that is a URL pointing inside the network.
func (g *Guard) CheckJSON(ctx context.Context, body []byte) error {
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("urlguard: %w", err)
	}
	var urls []found
	collect(doc, "", &urls)
	if len(urls) > MaxURLs {
		return &BlockedError{Path: urls[MaxURLs].path, Reason: fmt.Sprintf("more than %d URLs in one request", MaxURLs)}
	}
	for _, u := range urls {
		if err := g.CheckURL(ctx, u.value); err != nil {
			var be *BlockedError
			if errors.As(err, &be) {
				be.Path = u.path
			}
			return err
		}
	}
	return nil
}

type found struct{ path, value string }

// collect gathers every string that looks like an absolute URL.
func collect(v any, path string, out *[]found) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			p := k
			if path != "" {
				p = path + "." + k
			}
			collect(c, p, out)
		}
	case []any:
		for i, c := range t {
			collect(c, fmt.Sprintf("%s[%d]", path, i), out)
		}
	case string:
		if looksLikeURL(t) {
			*out = append(*out, found{path: path, value: strings.TrimSpace(t)})
		}
	}
}

// looksLikeURL reports whether s is, as a whole, a URL with a scheme and a
// host ("http://…", "gopher://…"); prose that mentions a URL is not
// fetched by anything and is left alone.
func looksLikeURL(s string) bool {
	s = strings.TrimSpace(s)
	i := strings.Index(s, "://")
	if i <= 0 || strings.ContainsAny(s, " \t\n") {
		return false
	}
	for _, c := range s[:i] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// CheckURL refuses one URL that points inside the network.
func (g *Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &BlockedError{Reason: "unparseable URL"}
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return &BlockedError{Reason: fmt.Sprintf("scheme %q is not allowed; use http or https", u.Scheme)}
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return &BlockedError{Reason: "URL has no host"}
	}
	if addr, ok := parseIPLoose(host); ok {
		return checkAddr(addr)
	}
	if internalName(host) {
		return &BlockedError{Reason: fmt.Sprintf("host %q is internal", host)}
	}
	return g.checkResolved(ctx, host)
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
