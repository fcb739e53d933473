package urlguard

import (
	"context"
	"errors"
	"testing"
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
