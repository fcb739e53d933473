package urlguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
)

// TestMappedHosts: a host that IDNA-aware fetchers (WHATWG URL parsers,
// curl with libidn2, IDNA2003 libraries) map onto an internal address or
// name is refused in every mode, local mode included, where an unresolvable
// name passes.
func TestMappedHosts(t *testing.T) {
	tests := []struct {
		url        string
		blocked    bool // in every mode
		unresolved bool // blocked only where a name that does not resolve is
	}{
		{url: "http://１２７.0.0.１/", blocked: true},            // full-width digits
		{url: "http://①②⑦.0.0.1/", blocked: true},            // circled digits
		{url: "http://⑯⑨.②⑤④.⑯⑨.②⑤④/latest/", blocked: true}, // metadata
		{url: "http://𝟏𝟐𝟕.0.0.1/", blocked: true},            // mathematical bold digits
		{url: "http://¹²⁷.0.0.1/", blocked: true},            // superscripts
		{url: "http://127。0。0。1/", blocked: true},            // ideographic full stops
		{url: "http://127．0．0．1/", blocked: true},            // full-width full stops
		{url: "http://127｡0｡0｡1/", blocked: true},            // half-width ideographic full stops
		{url: "http://１０.0.0.1/", blocked: true},
		{url: "http://０ｘ７ｆ.1/", blocked: true},          // a loose form, full width
		{url: "http://２１３０７０６４３３/", blocked: true},      // a loose form, one number
		{url: "http://1\u00ad27.0.0.1/", blocked: true}, // soft hyphen, which the mapping drops
		{url: "http://127.0.0.1\u200b/", blocked: true}, // zero-width space, dropped too
		{url: "http://1\u200d27.0.0.1/", blocked: true}, // zero-width joiner, dropped by transitional mappings
		{url: "http://%EF%BC%91%EF%BC%92%EF%BC%97.0.0.1/", blocked: true},
		{url: "http://ｌｏｃａｌｈｏｓｔ/", blocked: true},
		{url: "http://api.ＬＯＣＡＬＨＯＳＴ/", blocked: true},
		{url: "http://metadata.google.ｉｎｔｅｒｎａｌ/", blocked: true},
		{url: "http://redis.default.ｓｖｃ/", blocked: true},
		// Mapped onto characters no host may carry.
		{url: "http://１２７.0.0.１：８０/", blocked: true},
		{url: "http://［::1］/", blocked: true},
		{url: "http://127.0.0.1\u00a0/", blocked: true},
		{url: "http://images.example.com／@127.0.0.1/", blocked: true},
		// Not a valid name under UTS #46: no IDNA-aware fetcher fetches it.
		{url: "http://127.0.0⒈/", blocked: true},
		{url: "http://xn--zz.example.com/", blocked: true},
		{url: "http://127.0.0.1\u2028.example.com/", blocked: true},
		// Public names pass, mapped or not; a name is resolved in every form
		// a fetcher may look it up in.
		{url: "https://images.example.com/cat.png"},
		{url: "https://ｉｍａｇｅｓ.example.com/cat.png"},
		{url: "https://ＩＭＡＧＥＳ.EXAMPLE.COM/cat.png"},
		{url: "https://bücher.example.com/"},
		{url: "https://xn--bcher-kva.example.com/"},
		{url: "https://ｅｖｅｒｙｗｈｅｒｅ.example.com/", unresolved: true}, // only its mapped form resolves
		{url: "http://９３.１８４.２１６.３４/", unresolved: true},           // a name to a fetcher that does not map
		{url: "http://ｍｅｔａ.attacker.example/", blocked: true},      // its mapped form resolves to metadata
		{url: "http://ｒｅｂｉｎｄ.example.com/", blocked: true},
	}
	for _, m := range modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.url, func(t *testing.T) {
				err := m.guard.CheckURL(context.Background(), tt.url)
				want := tt.blocked || tt.unresolved && !m.guard.AllowUnresolvable
				if got := errors.Is(err, ErrBlocked); got != want {
					t.Errorf("blocked = %v (%v), want %v", got, err, want)
				}
			})
		}
	}
}

// spaces are characters some fetcher strips from a URL's ends: Unicode
// White_Space (Python's str.strip, Java's String.strip), the BOM
// (JavaScript's trim), zero-width and other format characters.
var spaces = []struct{ name, s string }{
	{"nbsp", "\u00a0"}, {"bom", "\ufeff"}, {"ideographic space", "\u3000"}, {"line separator", "\u2028"},
	{"paragraph separator", "\u2029"}, {"next line", "\u0085"}, {"en quad", "\u2000"}, {"hair space", "\u200a"},
	{"narrow nbsp", "\u202f"}, {"ogham space", "\u1680"}, {"zero-width space", "\u200b"},
	{"word joiner", "\u2060"}, {"mongolian vowel separator", "\u180e"}, {"left-to-right mark", "\u200e"},
	{"mixed", "\u00a0 \ufeff\t\u3000"},
}

// TestSpacedURLs: a URL with Unicode spaces or a BOM around it is still a
// URL, in a body and on its own.
func TestSpacedURLs(t *testing.T) {
	g := &Guard{Resolver: resolver, AllowUnresolvable: true}
	for _, sp := range spaces {
		for _, tc := range []struct{ where, url string }{
			{"before", sp.s + "http://127.0.0.1/"},
			{"around", sp.s + "http://169.254.169.254/latest/" + sp.s},
			{"before, mapped host", sp.s + "http://１２７.0.0.１/"},
			{"after the host", "http://127.0.0.1" + sp.s},
		} {
			t.Run(sp.name+"/"+tc.where, func(t *testing.T) {
				if !looksLikeURL(tc.url) {
					t.Errorf("looksLikeURL(%q) = false, want true", tc.url)
				}
				raw, err := json.Marshal(tc.url)
				if err != nil {
					t.Fatal(err)
				}
				for _, lit := range []string{string(raw), escaped(tc.url)} {
					err := g.CheckJSON(context.Background(), []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":`+lit+`}}]}]}`))
					var be *BlockedError
					if !errors.As(err, &be) || be.Path != "messages[0].content[0].image_url.url" {
						t.Errorf("CheckJSON(%s) = %v, want a BlockedError at the image url", lit, err)
					}
				}
			})
		}
		t.Run(sp.name+"/public", func(t *testing.T) {
			if err := g.CheckURL(context.Background(), sp.s+"https://images.example.com/cat.png"+sp.s); err != nil {
				t.Errorf("CheckURL = %v, want nil", err)
			}
		})
	}
}

// escaped writes s as a JSON string with every non-ASCII character
// \u-escaped, as a client may send it.
func escaped(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, "\\u%04x", u)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
