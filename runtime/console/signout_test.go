package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// postSignOut posts the sign-out form with csrf, naming origin as the
// browser would ("" sends no Origin), and returns the status and where it
// sends the browser.
func postSignOut(t *testing.T, client *http.Client, base, csrf, origin string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/console/signout", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	platformtest.Discard(resp)
	return resp.StatusCode, resp.Header.Get("Location")
}

// TestSignOutAndEmptyTeam: a sign-out form without the session's CSRF
// token or from another origin leaves the session working; the real form
// ends it. A team with no usage and no credit sees that said in words.
func TestSignOutAndEmptyTeam(t *testing.T) {
	p := platformtest.Start(t, platformtest.Options{})
	team := p.Team("quiet", 0)
	key := p.Key(adminwire.CreateKeyRequest{TeamID: team, Name: "unused"})
	client, csrf := formClient(t, p.URL)
	if got := postSignIn(t, client, p.URL, csrf, key); got != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", got)
	}
	cookie := jarSession(t, client, p.URL)
	resp, body := get(t, p.URL, "/console/usage", cookie)
	m := csrfField.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("usage page: %d, no sign-out form:\n%s", resp.StatusCode, body)
	}
	sessionToken := m[1]

	t.Run("a team with no usage and no credit sees it said", func(t *testing.T) {
		if !strings.Contains(body, `id="empty"`) || !strings.Contains(body, "No settled usage") {
			t.Errorf("the usage page of a team without usage does not say so:\n%s", body)
		}
		resp, body := get(t, p.URL, "/console/balance", cookie)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "No credit has been granted") {
			t.Errorf("the balance page of a team without credit: %d\n%s", resp.StatusCode, body)
		}
	})

	for _, tt := range []struct {
		name, csrf, origin string
	}{
		{"a sign-out without the session's token", "not-" + sessionToken, ""},
		{"a sign-out from another origin", sessionToken, "https://elsewhere.example"},
	} {
		t.Run(tt.name+" leaves the session working", func(t *testing.T) {
			status, loc := postSignOut(t, client, p.URL, tt.csrf, tt.origin)
			if resp, _ := get(t, p.URL, "/console/usage", cookie); resp.StatusCode != http.StatusOK {
				t.Errorf("after the forged sign-out (%d to %q) the session gets %d, want 200", status, loc, resp.StatusCode)
			}
		})
	}

	t.Run("the real form ends the session", func(t *testing.T) {
		status, loc := postSignOut(t, client, p.URL, sessionToken, p.URL)
		if status != http.StatusSeeOther || loc != "/console/signin" {
			t.Errorf("sign-out: %d to %q, want a redirect to sign in", status, loc)
		}
		if resp, _ := get(t, p.URL, "/console/usage", cookie); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("after sign-out the session gets %d, want a redirect to sign in", resp.StatusCode)
		}
	})
}
