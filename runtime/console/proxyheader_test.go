package console_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/pires/go-proxyproto"

	"github.com/llmplat/llmplat/runtime/platformtest"
)

// clientVia is an HTTP client whose connections come from the loopback
// address src and, when claim is set, open with a PROXY protocol v2
// header naming claim as the client, as the load balancer's do.
func clientVia(t *testing.T, src, claim string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil || claim == "" {
			return c, err
		}
		h := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP(claim), Port: 50123}, c.RemoteAddr())
		if _, err := h.WriteTo(c); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Jar: jar, Transport: tr, Timeout: httpTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// failSignIn fetches the sign-in form through client and posts a wrong
// credential; it returns the post's status, or the error of the first
// request that failed.
func failSignIn(client *http.Client, base string) (int, error) {
	resp, err := client.Get(base + "/console/signin")
	if err != nil {
		return 0, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindStringSubmatch(string(b))
	if m == nil {
		return resp.StatusCode, nil
	}
	resp, err = client.PostForm(base+"/console/signin", url.Values{"csrf": {m[1]}, "credential": {"llp_wrong-guess"}})
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestSignInCountsTheProxiedClient: behind a load balancer that sends
// PROXY v2 headers, the gateway's own listener gives the console the
// client the header names, so a failed sign-in counts against that
// address and not the load balancer's; the load balancer may also connect
// without a header (the kubelet's probes come from its subnets); and a
// header from any other address is refused with its connection, counting
// nothing for the address it claims.
func TestSignInCountsTheProxiedClient(t *testing.T) {
	const lb, elsewhere = "127.0.0.2", "127.0.0.1"
	p := platformtest.Start(t, platformtest.Options{ProxyProtocolFrom: []netip.Prefix{netip.MustParsePrefix(lb + "/32")}})
	rdb := p.Redis.Client()
	addresses := func() []string {
		t.Helper()
		keys, err := rdb.Keys(context.Background(), p.Redis.Prefix+"console:signin:addr:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			keys[i] = strings.TrimSuffix(strings.TrimPrefix(k, p.Redis.Prefix+"console:signin:addr:{"), "}")
		}
		sort.Strings(keys)
		return keys
	}

	if got, err := failSignIn(clientVia(t, lb, "203.0.113.7"), p.URL); err != nil || got != http.StatusUnauthorized {
		t.Fatalf("a wrong credential through the load balancer: %d, %v; want 401", got, err)
	}
	if got := addresses(); strings.Join(got, " ") != "203.0.113.7" {
		t.Errorf("failures counted for %v, want the client the header names (203.0.113.7) alone", got)
	}

	if got, err := failSignIn(clientVia(t, lb, ""), p.URL); err != nil || got != http.StatusUnauthorized {
		t.Errorf("a wrong credential from the load balancer's subnet without a header: %d, %v; want 401", got, err)
	}
	if got, err := failSignIn(clientVia(t, elsewhere, "198.51.100.9"), p.URL); err == nil {
		t.Errorf("a PROXY header from %s, outside the load balancer's addresses: answered %d, want the connection refused", elsewhere, got)
	}
	if got, err := failSignIn(clientVia(t, elsewhere, ""), p.URL); err != nil || got != http.StatusUnauthorized {
		t.Errorf("a wrong credential from %s without a header: %d, %v; want 401", elsewhere, got, err)
	}
	if got, want := strings.Join(addresses(), " "), "127.0.0.1 127.0.0.2 203.0.113.7"; got != want {
		t.Errorf("failures counted for %s, want %s (never the address a refused header claimed)", got, want)
	}
}
