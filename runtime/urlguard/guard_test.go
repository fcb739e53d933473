package urlguard

import (
	"context"
	"errors"
	"net/netip"
	"testing"
)

// fakeResolver answers from a table; unknown names fail to resolve.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	ips, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for _, s := range ips {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

var resolver = fakeResolver{
	"images.example.com":    {"93.184.216.34"},
	"rebind.example.com":    {"93.184.216.34", "10.0.0.7"},
	"meta.attacker.example": {"169.254.169.254"},
	// Names that map (UTS #46) onto others, for a resolver that looks the
	// unmapped form up too.
	"ｉｍａｇｅｓ.example.com":        {"93.184.216.34"},
	"ｍｅｔａ.attacker.example":     {"93.184.216.34"},
	"ｒｅｂｉｎｄ.example.com":        {"93.184.216.34"},
	"bücher.example.com":        {"93.184.216.34"},
	"xn--bcher-kva.example.com": {"93.184.216.34"},
	"everywhere.example.com":    {"93.184.216.34"},
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url     string
		blocked bool
	}{
		{url: "https://images.example.com/cat.png"},
		{url: "http://169.254.169.254/latest/meta-data/", blocked: true},
		{url: "http://127.0.0.1/", blocked: true},
		{url: "http://127.0.0.1:8080/admin", blocked: true},
		{url: "http://[::1]/", blocked: true},
		{url: "http://[::ffff:127.0.0.1]/", blocked: true},
		{url: "http://[fd00:ec2::254]/", blocked: true},
		{url: "http://10.1.2.3/", blocked: true},
		{url: "http://172.16.0.1/", blocked: true},
		{url: "http://192.168.1.1/", blocked: true},
		{url: "http://100.64.0.1/", blocked: true},
		{url: "http://0.0.0.0/", blocked: true},
		{url: "http://2130706433/", blocked: true},
		{url: "http://0x7f.1/", blocked: true},
		{url: "http://0177.0.0.1/", blocked: true},
		{url: "http://localhost/", blocked: true},
		{url: "http://api.localhost/", blocked: true},
		{url: "http://metadata.google.internal/", blocked: true},
		{url: "http://redis.default.svc/", blocked: true},
		{url: "http://redis/", blocked: true},
		{url: "http://rebind.example.com/", blocked: true},
		{url: "http://meta.attacker.example/", blocked: true},
		{url: "http://unknown.example.org/", blocked: true},
		{url: "file:///etc/passwd", blocked: true},
		{url: "gopher://images.example.com/", blocked: true},
		{url: "http://93.184.216.34/x.png"},
		// Forms WHATWG parsers clean up before they parse.
		{url: "http://169.254.169.254/lat\nest/meta-data/", blocked: true},
		{url: "http://169.254.169.254/a b", blocked: true},
		{url: "ht\ttp://169.254.169.254/", blocked: true},
		{url: "\x00http://169.254.169.254/", blocked: true},
		{url: "\x01http://127.0.0.1:8080/admin/teams", blocked: true},
		{url: " \x1fhttp://127.0.0.1/ \x00", blocked: true},
		{url: "http:169.254.169.254/", blocked: true},
		{url: "http:\\\\169.254.169.254\\x", blocked: true},
		{url: "http:/\\127.0.0.1/", blocked: true},
		{url: "http://images.example.com\\@127.0.0.1/", blocked: true},
		{url: "http://%31%32%37.0.0.1/", blocked: true},
		{url: "http://127.0.0.1\x7f/", blocked: true},
		// IPv6 forms that carry an internal IPv4 address.
		{url: "http://[::127.0.0.1]/", blocked: true},
		{url: "http://[::a9fe:a9fe]/", blocked: true},
		{url: "http://[2002:7f00:1::]/", blocked: true},
		{url: "http://[2002:a9fe:a9fe::1]/", blocked: true},
		{url: "http://[64:ff9b::127.0.0.1]/", blocked: true},
		{url: "http://[64:ff9b:1::a9fe:a9fe]/", blocked: true},
		{url: "http://[2001:0:7f00:1::]/", blocked: true},
		{url: "http://[2001:0:5db8:d822::80ff:fffe]/", blocked: true}, // Teredo client 127.0.0.1
		// Public addresses in the same forms pass.
		{url: "http://[2002:5db8:d822::1]/x.png"},
		{url: "http://[2606:2800:220:1:248:1893:25c8:1946]/"},
		{url: " https://images.example.com/cat.png\n"},
	}
	g := &Guard{Resolver: resolver}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := g.CheckURL(context.Background(), tt.url)
			if got := errors.Is(err, ErrBlocked); got != tt.blocked {
				t.Errorf("blocked = %v (%v), want %v", got, err, tt.blocked)
			}
		})
	}
}

func TestCheckJSON(t *testing.T) {
	tests := []struct {
		name, body, path string
	}{
		{name: "image url", path: "messages[0].content[1].image_url.url",
			body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"http://169.254.169.254/"}}]}]}`},
		{name: "tool definition", path: "tools[0].function.parameters.properties.u.default",
			body: `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"u":{"default":"http://127.0.0.1/"}}}}}]}`},
		{name: "newline inside the url", path: "messages[0].content[0].image_url.url",
			body: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/lat\nest/meta-data/"}}]}]}`},
		{name: "space inside the url", path: "messages[0].content[0].image_url.url",
			body: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/a b"}}]}]}`},
		{name: "control before the scheme", path: "messages[0].content[0].image_url.url",
			body: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"\u0001http://127.0.0.1:8080/admin/teams"}}]}]}`},
		{name: "prose mentioning a url passes",
			body: `{"model":"m","messages":[{"role":"user","content":"what is at http://127.0.0.1/ ?"}]}`},
		{name: "a number out of float64's range passes", body: `{"model":"m","x":1e999,"messages":[]}`},
		{name: "a number out of range beside an internal url", path: "u", body: `{"x":1e999,"u":"http://127.0.0.1/"}`},
		{name: "public image passes",
			body: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://images.example.com/a.png"}}]}]}`},
	}
	g := &Guard{Resolver: resolver}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := g.CheckJSON(context.Background(), []byte(tt.body))
			var be *BlockedError
			switch {
			case tt.path == "" && err != nil:
				t.Errorf("CheckJSON = %v, want nil", err)
			case tt.path != "" && !errors.As(err, &be):
				t.Errorf("CheckJSON = %v, want a BlockedError", err)
			case tt.path != "" && be.Path != tt.path:
				t.Errorf("path = %q, want %q", be.Path, tt.path)
			}
		})
	}
}

func TestAllowUnresolvable(t *testing.T) {
	g := &Guard{Resolver: resolver, AllowUnresolvable: true}
	if err := g.CheckURL(context.Background(), "http://unknown.example.org/"); err != nil {
		t.Errorf("CheckURL = %v, want nil when unresolvable names are allowed", err)
	}
	if err := g.CheckURL(context.Background(), "http://127.0.0.1/"); err == nil {
		t.Error("loopback passed with AllowUnresolvable")
	}
}

// TestMayHoldURL: the pre-check lets through only documents with no colon
// in any string, escaped or not.
func TestMayHoldURL(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, false},
		{`{"a":"say \"hi\" \\ now"}`, false},
		{`{"a":"http://127.0.0.1/"}`, true},
		{`{"a":"http\u003a//127.0.0.1/"}`, true},
		{`{"a":"\u00e9"}`, true}, // any \u escape: the check does not decode it
		{`{"a:b":1}`, true},      // a key's colon counts too
		{`{"a":["x", {"b": "y"}]}`, false},
	} {
		if got := mayHoldURL([]byte(tc.body)); got != tc.want {
			t.Errorf("mayHoldURL(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}
