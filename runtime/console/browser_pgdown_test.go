package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// TestTeamPagesWithPostgresDown: with PostgreSQL cut off, a team member
// who signs in (the gateway's key cache still knows the key) lands on the
// designed 503 page saying the database is down, with the navigation and
// the sign-out form, and every team page answers the same, never a bounce
// to a blank sign-in form; once the database is back the same session
// reads the pages.
func TestTeamPagesWithPostgresDown(t *testing.T) {
	tok, err := auth.GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	p := platformtest.Start(t, platformtest.Options{AdminToken: tok, Proxied: true})
	team := p.Team("alpha", 1_000_000)
	key := p.Key(adminwire.CreateKeyRequest{TeamID: team, Name: "ci"})
	browser := newBrowser(t)
	base := p.URL
	// A first sign-in while the database answers, as the key's first use
	// would be: the gateway's key cache then knows the key.
	warm := newTab(t, browser)
	signIn(t, warm, base, key)

	p.PostgresProxy.Cut()
	restored := false
	defer func() {
		if !restored {
			p.PostgresProxy.Restore()
		}
	}()
	tab := newTab(t, browser)
	do(t, tab, chromedp.Navigate(base+"/console"), chromedp.WaitVisible(chromedp.ID("credential")))
	do(t, tab, chromedp.SendKeys(chromedp.ID("credential"), key), chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("problem")))
	loc := run(t, tab, chromedp.Location())
	text := run(t, tab, chromedp.Text(chromedp.ID("problem")))
	t.Logf("after sign-in with PostgreSQL down: %s: %q", loc, text)
	if !strings.Contains(text, "database is not answering") {
		t.Errorf("after sign-in with PostgreSQL down the page says %q, want that the database is not answering", text)
	}
	if !run(t, tab, chromedp.Evaluate[bool](`!!document.getElementById('signout')`)) {
		t.Error("the database-down page after sign-in has no sign-out form")
	}
	cookie := sessionCookie(t, tab, base)
	for _, path := range []string{"/console/", "/console/usage", "/console/balance", "/console/keys", "/console/models", "/console/usage.csv", "/console/usage.svg"} {
		resp, body := get(t, base, path, cookie)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s with PostgreSQL down: %d (Location %q), want 503 with Retry-After", path, resp.StatusCode, resp.Header.Get("Location"))
		}
		if path == "/console/usage.csv" || path == "/console/usage.svg" {
			continue
		}
		if !strings.Contains(body, `id="problem"`) || !strings.Contains(body, "database is not answering") {
			t.Errorf("%s with PostgreSQL down: not the designed page:\n%s", path, body)
		}
		do(t, tab, chromedp.Navigate(base+path), chromedp.WaitReady("body"))
		if got := run(t, tab, chromedp.Evaluate[string](`document.getElementById('problem')?.textContent ?? ''`)); !strings.Contains(got, "database is not answering") {
			html := run(t, tab, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Errorf("%s in the browser with PostgreSQL down: not the designed page:\n%s", path, html)
		}
	}
	p.PostgresProxy.Restore()
	restored = true
	eventually(t, func() string {
		if resp, _ := get(t, base, "/console/usage", cookie); resp.StatusCode != http.StatusOK {
			return "/console/usage after PostgreSQL came back: " + resp.Status + ", Location " + resp.Header.Get("Location")
		}
		return ""
	})
}
