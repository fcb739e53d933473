package console_test

import (
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// update rewrites the screenshots in docs/ (go test ./runtime/console
// -run TestConsoleInBrowser -update); a normal run leaves the tree alone.
var update = flag.Bool("update", false, "write the console screenshots under docs/")

const (
	// browserStepTimeout bounds one step in the browser (a navigation, a
	// click and the page it loads): seconds on a busy 2-core machine.
	browserStepTimeout = 60 * time.Second
	// waitTimeout bounds a wait for state that changes elsewhere (a drain
	// reaching the heartbeat): a few 5 s heartbeats.
	waitTimeout = 60 * time.Second
	// httpTimeout bounds one request of the tests' own HTTP client.
	httpTimeout = 30 * time.Second
)

// browserNames are the Chromium binaries we look for, Debian's first.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"}

// newBrowser starts a headless Chromium for the test, or skips it (fails
// under CI=true) when there is none.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, n := range browserNames {
		if p, err := exec.LookPath(n); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		testenv.Missing(t, "Chromium", "no chromium binary on PATH", "install it (apt-get install -y chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// newTab opens a tab in a browser context of its own: its cookies are its
// own, as another person's browser would be.
func newTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open tab: %v", err)
	}
	return ctx
}

// do runs steps in the tab within browserStepTimeout.
func do(t *testing.T, tab context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, browserStepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// run runs one action in the tab within browserStepTimeout.
func run[T any](t *testing.T, tab context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, browserStepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// signIn signs the tab in with cred through the form, as a person would.
func signIn(t *testing.T, tab context.Context, base, cred string) {
	t.Helper()
	do(t, tab, chromedp.Navigate(base+"/console"), chromedp.WaitVisible(chromedp.ID("credential")))
	do(t, tab, chromedp.SendKeys(chromedp.ID("credential"), cred), chromedp.Click(chromedp.ID("signin")))
	ctx, cancel := context.WithTimeout(tab, browserStepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("signout"))); err != nil {
		loc, _ := chromedp.Run(tab, chromedp.Location())
		html, _ := chromedp.Run(tab, chromedp.OuterHTML(chromedp.CSS("body")))
		t.Fatalf("sign-in did not reach a signed-in page: %v; at %s:\n%s", err, loc, html)
	}
}

// sessionCookie returns the tab's console session cookie.
func sessionCookie(t *testing.T, tab context.Context, base string) *http.Cookie {
	t.Helper()
	res, err := chromedp.Call(tab, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/console/"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == "llmplat_console" {
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict {
				t.Errorf("session cookie HttpOnly=%v SameSite=%q, want HttpOnly and Strict", c.HTTPOnly, c.SameSite)
			}
			return &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	t.Fatal("the tab has no session cookie")
	return nil
}

// get fetches path with the cookie (if any) and no redirects followed.
func get(t *testing.T, base, path string, cookie *http.Cookie) (*http.Response, string) {
	t.Helper()
	client := &http.Client{Timeout: httpTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// csrfField reads the CSRF token out of a form.
var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// formClient is an HTTP client with a cookie jar, holding a fresh sign-in
// form's CSRF token.
func formClient(t *testing.T, base string) (*http.Client, string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, Timeout: httpTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(base + "/console/signin")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("no CSRF token in the sign-in form:\n%s", b)
	}
	return client, m[1]
}

// postSignIn posts the sign-in form and returns the status.
func postSignIn(t *testing.T, client *http.Client, base, csrf, cred string) int {
	t.Helper()
	resp, err := client.PostForm(base+"/console/signin", url.Values{"csrf": {csrf}, "credential": {cred}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// screenshot writes the tab's page to docs/<name> when -update is set.
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	if !*update {
		return
	}
	png := run(t, tab, chromedp.FullScreenshot(100))
	dir := "../../docs"
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// eventually retries check until it returns "" or waitTimeout passes, then
// fails with check's last complaint.
func eventually(t *testing.T, check func() string) {
	t.Helper()
	var msg string
	defer func() {
		if msg != "" {
			t.Log(msg)
		}
	}()
	testenv.EventuallyWithin(t, waitTimeout, "the browser's page", func() bool {
		msg = check()
		return msg == ""
	})
}

// contains reports whether any of the needles is in s.
func contains(s string, needles ...string) string {
	for _, n := range needles {
		if strings.Contains(s, n) {
			return n
		}
	}
	return ""
}
