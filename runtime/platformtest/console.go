package platformtest

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// consoleTimeout bounds one console request of a test: a page renders in
// milliseconds, so only a hung server takes this long.
const consoleTimeout = 30 * time.Second

// csrfField finds the sign-in form's CSRF token.
var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// ConsoleSignIn signs in to the web console at consoleURL (ending in
// /console) with credential, as a browser does: it reads the sign-in
// form's CSRF token, posts the form, and follows the redirect. It returns
// the client holding the session cookie and the page signed in to, and
// fails the test unless that page is 200 at wantPath.
func ConsoleSignIn(tb testing.TB, consoleURL, credential, wantPath string) (*http.Client, string) {
	tb.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		tb.Fatal(err)
	}
	client := &http.Client{Jar: jar, Timeout: consoleTimeout}
	resp, err := client.Get(consoleURL)
	if err != nil {
		tb.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		tb.Fatalf("GET %s: %d, no sign-in form:\n%s", consoleURL, resp.StatusCode, body)
	}
	resp, err = client.PostForm(strings.TrimSuffix(consoleURL, "/")+"/signin", url.Values{"csrf": {string(m[1])}, "credential": {credential}})
	if err != nil {
		tb.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := resp.Request.URL.Path; resp.StatusCode != http.StatusOK || got != wantPath {
		tb.Fatalf("sign-in ended at %s with %d, want %s:\n%s", got, resp.StatusCode, wantPath, body)
	}
	return client, string(body)
}
