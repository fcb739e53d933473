package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// TestRedisDown: with the session store cut off, a signed-in browser's
// pages answer a designed 503 page saying so, never a panic, a blank or a
// bounce to the sign-in form; they work again once Redis is back.
func TestRedisDown(t *testing.T) {
	tok, err := auth.GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	p := platformtest.Start(t, platformtest.Options{AdminToken: tok, Proxied: true})
	team := p.Team("alpha", 1_000_000)
	key := p.Key(adminwire.CreateKeyRequest{TeamID: team, Name: "ci"})
	sessions := map[string]*http.Cookie{}
	for name, cred := range map[string]string{"admin": tok, "team": key} {
		client, csrf := formClient(t, p.URL)
		if got := postSignIn(t, client, p.URL, csrf, cred); got != http.StatusSeeOther {
			t.Fatalf("%s sign-in: status %d, want 303", name, got)
		}
		sessions[name] = jarSession(t, client, p.URL)
	}
	p.RedisProxy.Cut()
	pages := map[string][]string{"admin": {"/console/", "/console/platform/nodes", "/console/platform/models"},
		"team": {"/console/", "/console/usage", "/console/keys"}}
	for who, paths := range pages {
		for _, path := range paths {
			resp, body := get(t, p.URL, path, sessions[who])
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("%s %s with Redis down: status %d (Location %q), want 503", who, path, resp.StatusCode, resp.Header.Get("Location"))
			}
			if !strings.Contains(body, `id="problem"`) || !strings.Contains(body, "session store (Redis) is not answering") {
				t.Errorf("%s %s with Redis down: not the designed page:\n%s", who, path, body)
			}
			if resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Security-Policy") == "" {
				t.Errorf("%s %s with Redis down: headers %v, want Retry-After and the CSP", who, path, resp.Header)
			}
		}
	}
	p.RedisProxy.Restore()
	eventually(t, func() string {
		resp, _ := get(t, p.URL, "/console/platform/nodes", sessions["admin"])
		if resp.StatusCode != http.StatusOK {
			return "nodes page after Redis came back: status " + resp.Status
		}
		return ""
	})
}

// jarSession returns the console session cookie a client's jar holds.
func jarSession(t *testing.T, client *http.Client, base string) *http.Cookie {
	t.Helper()
	u, err := url.Parse(base + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range client.Jar.Cookies(u) {
		if c.Name == "llmplat_console" {
			return &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	t.Fatal("no session cookie after sign-in")
	return nil
}
