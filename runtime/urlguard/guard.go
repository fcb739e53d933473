package urlguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode"
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
	if !json.Valid(body) {
		return fmt.Errorf("urlguard: %w", json.Unmarshal(body, &doc))
	}
	if !mayHoldURL(body) {
		return nil // the common request: no string has a scheme's colon
	}
	urls := collect(body)
	if len(urls) > MaxURLs {
		return &BlockedError{Path: urls[MaxURLs].path(), Reason: fmt.Sprintf("more than %d URLs in one request", MaxURLs)}
	}
	for _, u := range urls {
		if err := g.CheckURL(ctx, u.value); err != nil {
			var be *BlockedError
			if errors.As(err, &be) {
				be.Path = u.path()
			}
			return err
		}
	}
	return nil
}

// mayHoldURL reports whether a JSON document may hold a string that
// looksLikeURL: one with a colon, written as such or escaped (any \u
// escape counts, whatever it encodes). Keys are strings too, and are
// counted; the colons between keys and values are not.
func mayHoldURL(body []byte) bool {
	in := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case !in:
			in = c == '"'
		case c == '"':
			in = false
		case c == ':':
			return true
		case c == '\\':
			i++
			if i < len(body) && body[i] == 'u' {
				return true
			}
		}
	}
	return false
}

// normalize does what a WHATWG URL parser (browsers, and the URL
// libraries engines fetch images with) does before parsing: it strips
// leading and trailing C0 controls and spaces, and removes every ASCII
// tab and newline. "ht\ttp://…" and "\x00http://…" are URLs to them. It
// strips what other fetchers trim from the ends too (see trimmed), so
// "\u00a0http://…" is a URL.
func normalize(s string) string {
	s = strings.TrimFunc(s, trimmed)
	if strings.ContainsAny(s, "\t\n\r") {
		s = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
	}
	return s
}

// trimmed reports a character some fetcher strips from a URL's ends:
// WHATWG's C0 controls and space; Unicode White_Space (NBSP, U+3000, U+2028
// …), which Python's str.strip and Java's String.strip remove; and, to be
// safe, every other control or format character: the BOM, which
// JavaScript's trim removes, zero-width spaces and joiners, bidi marks.
func trimmed(r rune) bool {
	return r <= 0x20 || unicode.In(r, unicode.White_Space, unicode.Cc, unicode.Cf)
}

// special are WHATWG's special schemes: after "scheme:" any slashes and
// backslashes lead to the host, so "http:169.254.169.254" has one.
var special = map[string]bool{"http": true, "https": true, "ws": true, "wss": true, "ftp": true, "file": true}

// schemeOf returns s's scheme, lower-cased, when s starts with one
// (ALPHA *(ALPHA / DIGIT / "+" / "-" / ".") ":").
func schemeOf(s string) (string, bool) {
	i := strings.IndexByte(s, ':')
	if i <= 0 {
		return "", false
	}
	for j, c := range s[:i] {
		alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alpha && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", false
		}
	}
	return strings.ToLower(s[:i]), true
}

// looksLikeURL reports whether s, normalized as a URL parser would, starts
// with a scheme followed by an authority ("http://…", "gopher://…") or is
// of a special scheme ("http:host"). Prose that mentions a URL somewhere
// is not fetched by anything and is left alone; a string an engine's URL
// parser would fetch is judged, whatever spaces or controls it carries.
func looksLikeURL(s string) bool {
	s = normalize(s)
	scheme, ok := schemeOf(s)
	if !ok {
		return false
	}
	rest := s[len(scheme)+1:]
	return special[scheme] || strings.HasPrefix(rest, "//")
}

// CheckURL refuses one URL that points inside the network. The URL is
// read twice, by Go's parser and the way WHATWG parsers read it, and
// refused when either finds an internal host, so a string the two read
// differently cannot slip through.
func (g *Guard) CheckURL(ctx context.Context, raw string) error {
	s := normalize(raw)
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return &BlockedError{Reason: "URL carries control characters"}
	}
	scheme, _ := schemeOf(s)
	switch scheme {
	case "http", "https":
	default:
		return &BlockedError{Reason: fmt.Sprintf("scheme %q is not allowed; use http or https", scheme)}
	}
	wHost, ok := whatwgHost(s)
	if !ok {
		return &BlockedError{Reason: "unparseable URL"}
	}
	u, err := url.Parse(s)
	if err != nil {
		return &BlockedError{Reason: "unparseable URL"}
	}
	goHost := strings.ToLower(u.Hostname())
	if goHost == "" || wHost == "" {
		return &BlockedError{Reason: "URL has no host"}
	}
	if err := g.checkHost(ctx, wHost); err != nil {
		return err
	}
	if goHost != wHost {
		return g.checkHost(ctx, goHost)
	}
	return nil
}

// whatwgHost returns the host of a normalized URL of a special scheme as a
// WHATWG parser finds it: after "scheme:", every slash and backslash is
// skipped; the authority ends at the first /, \, ? or #; the userinfo ends
// at its last @; the host is percent-decoded and lower-cased. ok is false
// when the host does not decode.
func whatwgHost(s string) (host string, ok bool) {
	scheme, _ := schemeOf(s)
	rest := strings.TrimLeft(s[len(scheme)+1:], "/\\")
	if i := strings.IndexAny(rest, "/\\?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", false
		}
		rest = rest[:end+1]
	} else if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		rest = rest[:i]
	}
	decoded, err := url.PathUnescape(rest)
	if err != nil {
		return "", false
	}
	return strings.ToLower(decoded), true
}
