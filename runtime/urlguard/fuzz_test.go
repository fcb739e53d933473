package urlguard

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/idna"
)

// fetcherMappings are UTS #46 mappings fetchers apply to a host: the
// library's Lookup profile (strict, non-transitional), and lenient ones as
// WHATWG parsers and libidn2 use, non-transitional and transitional.
var fetcherMappings = []*idna.Profile{
	idna.Lookup,
	idna.New(idna.MapForLookup(), idna.StrictDomainName(false), idna.CheckHyphens(false)),
	idna.New(idna.MapForLookup(), idna.Transitional(true), idna.StrictDomainName(false), idna.CheckHyphens(false)),
}

// readings returns host as written and as each fetcher mapping reads it,
// lower-cased and without a trailing dot. A mapping's output counts even
// when it errs: a lenient fetcher may use it.
func readings(host string) []string {
	host = strings.ToLower(host)
	out := []string{strings.TrimSuffix(host, ".")}
	for _, p := range fetcherMappings {
		m, _ := p.ToASCII(host)
		out = append(out, strings.TrimSuffix(m, "."))
	}
	return out
}

// internalAddr reports whether some reading of host is an address literal,
// in any loose form, in a refused range.
func internalAddr(host string) (string, bool) {
	for _, h := range readings(host) {
		if a, ok := parseIPLoose(h); ok && checkAddr(a) != nil {
			return h, true
		}
	}
	return "", false
}

// FuzzParseIPLoose: parsing never panics, and for any host, if a fetcher's
// UTS #46 mapping of it parses (loosely) as an address in a refused range,
// the guard refuses the host, in local mode too.
func FuzzParseIPLoose(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1", "2130706433", "0x7f.1", "0177.0.0.1", "1.2.3", "::1", "999999999999",
		"::ffff:0:7f00:1", "::ffff:0:127.0.0.1", "fec0::1", "64:ff9b:1::a00:1", "100::1", "::a00:1",
		"2002:a00:1::", "fe80::1%eth0", "64:ff9b::7f00:1%x", "2606:2800:220:1:0:5efe:7f00:1",
		"１２７.0.0.１", "①②⑦.0.0.1", "⑯⑨.②⑤④.⑯⑨.②⑤④", "127。0。0。1", "０ｘ７ｆ.1", "２１３０７０６４３３",
		"1\u00ad27.0.0.1", "1\u200d27.0.0.1", "𝟏𝟐𝟕.0.0.1", "127.0.0.1\u200b", "93.184.216.34", "９３.１８４.２１６.３４",
	} {
		f.Add(s)
	}
	g := &Guard{Resolver: resolver, AllowUnresolvable: true}
	f.Fuzz(func(t *testing.T, host string) {
		if a, ok := parseIPLoose(host); ok {
			_ = checkAddr(a) // must never panic
		}
		if h, ok := internalAddr(host); ok && g.checkHost(context.Background(), host) == nil {
			t.Fatalf("passed host %q, which a fetcher reads as %q, an internal address", host, h)
		}
	})
}

// FuzzGuard: whatever CheckURL passes, neither Go's parser nor a
// WHATWG-style reading of the string finds an internal host in it, as
// written or as a fetcher maps it (UTS #46); and Unicode spaces around a
// URL change nothing.
func FuzzGuard(f *testing.F) {
	for _, s := range []string{
		"http://169.254.169.254/", "ht\ttp://127.0.0.1/", "\x00http://10.0.0.1/", "http:\\\\127.0.0.1",
		"http://[::127.0.0.1]/", "http://[2002:7f00:1::]/", "https://images.example.com/a.png",
		"http://a@b@127.0.0.1/", "http://%31%32%37.1/", "http://0x7f.1/", "http://[64:ff9b::a00:1]/",
		"http://[::ffff:0:7f00:1]/", "http://[fec0::1]/", "http://[64:ff9b:1::5db8:d822]/", "http://[100::1]/",
		"http://[fec0::1%25eth0]/", "http://１２７.0.0.１/", "http://①②⑦.0.0.1/", "http://127。0。0。1/",
		"http://%EF%BC%91%EF%BC%92%EF%BC%97.0.0.1/", "http://ｌｏｃａｌｈｏｓｔ/", "http://１２７.0.0.１：８０/",
		"\u00a0http://127.0.0.1/", "\ufeffhttp://１２７.0.0.１/", "http://127.0.0.1\u3000", "https://bücher.example.com/",
	} {
		f.Add(s)
	}
	g := &Guard{Resolver: resolver, AllowUnresolvable: true}
	internal := func(host string) (string, bool) {
		if h, ok := internalAddr(host); ok {
			return h, true
		}
		for _, h := range readings(host) {
			if _, ok := parseIPLoose(h); !ok && h != "" && internalName(h) {
				return h, true
			}
		}
		return "", false
	}
	f.Fuzz(func(t *testing.T, raw string) {
		err := g.CheckURL(context.Background(), raw)
		for _, sp := range spaces {
			wrapped := sp.s + raw + sp.s
			if looksLikeURL(raw) && !looksLikeURL(wrapped) {
				t.Fatalf("%q looks like a URL, but not with %s around it", raw, sp.name)
			}
			if err != nil && g.CheckURL(context.Background(), wrapped) == nil {
				t.Fatalf("refused %q (%v), but passed it with %s around it", raw, err, sp.name)
			}
		}
		if err != nil {
			return
		}
		s := normalize(raw)
		if u, err := url.Parse(s); err == nil {
			if h, ok := internal(u.Hostname()); ok {
				t.Fatalf("passed %q, whose host for Go is internal: %q read as %q", raw, u.Hostname(), h)
			}
		}
		if w, ok := whatwgHost(s); ok {
			if h, ok := internal(w); ok {
				t.Fatalf("passed %q, whose host for a WHATWG parser is internal: %q read as %q", raw, w, h)
			}
		}
	})
}

// FuzzMayHoldURL: whatever the pre-check lets through holds no string
// that looks like a URL, so CheckJSON may skip its decode.
func FuzzMayHoldURL(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"a":"http://127.0.0.1/"}`, `{"a":"http\u003a//x"}`, `["a","b\\"]`, `"x"`, `{"a":"\"http:x"}`,
		"{\"a\":\"\u00a0http://127.0.0.1/\"}", "{\"a\":\"\ufeffhttp://127.0.0.1/\"}", `{"a":"\u00a0http://127.0.0.1/"}`,
		`{"a":"\ufeffhttp://127.0.0.1/"}`, `{"a":"\u3000\u200bhttp://x"}`, "{\"a\":\"http://１２７.0.0.１/\"}",
		"{\"a\":\"\u00a0\ufeff no colon\"}", "[\"\u2028\u2029\"]",
	} {
		f.Add([]byte(s))
	}
	g := &Guard{Resolver: resolver}
	f.Fuzz(func(t *testing.T, body []byte) {
		if mayHoldURL(body) || !json.Valid(body) {
			return
		}
		if err := g.CheckJSON(context.Background(), body); err != nil {
			t.Fatalf("CheckJSON(%s) = %v, want nil", body, err)
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var doc any
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("valid JSON did not decode: %v", err)
		}
		for _, u := range collect(body) {
			t.Fatalf("let through %s, whose string %q at %s looks like a URL", body, u.value, u.path())
		}
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, c := range x {
					if strings.Contains(k, ":") {
						t.Fatalf("let through %s, whose key %q has a colon", body, k)
					}
					walk(c)
				}
			case []any:
				for _, c := range x {
					walk(c)
				}
			case string:
				if strings.Contains(x, ":") {
					t.Fatalf("let through %s, whose string %q has a colon", body, x)
				}
			}
		}
		walk(doc)
	})
}
