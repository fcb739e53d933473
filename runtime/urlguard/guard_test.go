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
		{name: "prose mentioning a url passes",
			body: `{"model":"m","messages":[{"role":"user","content":"what is at http://127.0.0.1/ ?"}]}`},
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

func FuzzParseIPLoose(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "2130706433", "0x7f.1", "0177.0.0.1", "1.2.3", "::1", "999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseIPLoose(s) // must never panic
	})
}
