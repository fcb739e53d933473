package console_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// frozenAnswerBound is how long the test waits for a page while
// PostgreSQL is frozen: six times the 5 s budget, so a busy machine does
// not fail the test, while a page that waits for the thaw never answers
// within it.
const frozenAnswerBound = 30 * time.Second

// TestPostgresFrozen: with PostgreSQL frozen, a team's usage page (whose
// session is checked against its API key in the database), an admin's
// teams page and the weekly cost report's page answer the designed 503
// page with Retry-After while the database is still frozen, within the
// page's budget rather than at the thaw; with PostgreSQL down (connections refused at once) they answer
// the same; and a database that does not answer ends no session: once it
// is back, the same cookies read the same pages.
func TestPostgresFrozen(t *testing.T) {
	tok, err := auth.GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	p := platformtest.Start(t, platformtest.Options{AdminToken: tok, Proxied: true})
	team := p.Team("alpha", 1_000_000)
	key := p.Key(adminwire.CreateKeyRequest{TeamID: team, Name: "ci"})
	pages := []struct{ who, cred, path string }{
		{"team", key, "/console/usage"},
		{"admin", tok, "/console/platform/teams"},
	}
	sessions := map[string]*http.Cookie{}
	for _, pg := range pages {
		client, csrf := formClient(t, p.URL)
		if got := postSignIn(t, client, p.URL, csrf, pg.cred); got != http.StatusSeeOther {
			t.Fatalf("%s sign-in: status %d, want 303", pg.who, got)
		}
		sessions[pg.who] = jarSession(t, client, p.URL)
		if resp, body := get(t, p.URL, pg.path, sessions[pg.who]); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s before the freeze: %d\n%s", pg.who, pg.path, resp.StatusCode, body)
		}
	}

	p.PostgresProxy.Freeze()
	frozen := true
	defer func() {
		if frozen {
			p.PostgresProxy.Thaw()
		}
	}()
	unavailable := func(state string) {
		t.Helper()
		for _, pg := range pages {
			t0 := time.Now()
			status, header, body, err := getWithin(p.URL+pg.path, sessions[pg.who], frozenAnswerBound)
			took := time.Since(t0).Round(time.Millisecond)
			if err != nil {
				t.Errorf("%s %s with PostgreSQL %s: no answer after %v (%v): it waits for the database", pg.who, pg.path, state, took, err)
				continue
			}
			t.Logf("%s %s with PostgreSQL %s: %d after %v", pg.who, pg.path, state, status, took)
			if status != http.StatusServiceUnavailable || header.Get("Retry-After") == "" {
				t.Errorf("%s %s with PostgreSQL %s: %d (Location %q, Retry-After %q), want 503 with Retry-After",
					pg.who, pg.path, state, status, header.Get("Location"), header.Get("Retry-After"))
			}
			if !strings.Contains(body, `id="problem"`) || !strings.Contains(body, "database is not answering") {
				t.Errorf("%s %s with PostgreSQL %s: not the designed page:\n%s", pg.who, pg.path, state, body)
			}
		}
	}
	back := func(state string) {
		t.Helper()
		for _, pg := range pages {
			eventually(t, func() string {
				resp, _ := get(t, p.URL, pg.path, sessions[pg.who])
				if resp.StatusCode != http.StatusOK {
					return pg.who + " " + pg.path + " after PostgreSQL " + state + ": status " + resp.Status + ", Location " + resp.Header.Get("Location")
				}
				return ""
			})
		}
	}
	unavailable("frozen")
	// The weekly cost report, first asked for while the database is
	// frozen: the page answers within its budget, its computation goes on,
	// and after the thaw the page shows it.
	const costPath = "/console/platform/cost"
	t0 := time.Now()
	status, header, body, err := getWithin(p.URL+costPath, sessions["admin"], frozenAnswerBound)
	switch {
	case err != nil:
		t.Errorf("%s with PostgreSQL frozen: no answer after %v (%v): it waits for the database", costPath, time.Since(t0), err)
	case status != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || !strings.Contains(body, "database is not answering"):
		t.Errorf("%s with PostgreSQL frozen: %d (Retry-After %q), want the designed 503 page:\n%s", costPath, status, header.Get("Retry-After"), body)
	}
	p.PostgresProxy.Thaw()
	frozen = false
	back("thawed")
	eventually(t, func() string {
		if resp, _ := get(t, p.URL, costPath, sessions["admin"]); resp.StatusCode != http.StatusOK {
			return costPath + " after the thaw: status " + resp.Status
		}
		return ""
	})

	p.PostgresProxy.Cut()
	unavailable("down")
	p.PostgresProxy.Restore()
	back("came back")
}

// getWithin fetches url with the cookie, following no redirect, and gives
// up after within.
func getWithin(url string, cookie *http.Cookie, within time.Duration) (int, http.Header, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, "", err
	}
	req.AddCookie(cookie)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}
