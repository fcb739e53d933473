package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// selfServeFixture is a platform with three teams: alpha and beta allow
// personal keys (alpha for at most 30 days), gamma does not; each has one
// managed key, made through the admin store as Terraform's would be.
type selfServeFixture struct {
	p                      *platformtest.Platform
	alpha, beta, gamma     int64
	keyA, keyB, keyC       string
	managedA               adminwire.Key
	grantA                 int64 // alpha's credit grant, micro-credits
	allowedModel, otherOne string
}

func newSelfServeFixture(t *testing.T) *selfServeFixture {
	t.Helper()
	tok, err := auth.GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	f := &selfServeFixture{p: platformtest.Start(t, platformtest.Options{AdminToken: tok, Proxied: true}),
		grantA: 7_500_000, allowedModel: "llama-8b", otherOne: "qwen-32b"}
	f.p.Model("llama-8b", "llama-8b")
	f.p.Model("qwen-32b", "qwen-32b")
	f.alpha, f.beta, f.gamma = f.p.Team("alpha", f.grantA), f.p.Team("beta", 1_000_000), f.p.Team("gamma", 1_000_000)
	ctx := context.Background()
	on, thirty := true, 30
	for _, id := range []int64{f.alpha, f.beta} {
		if _, err := f.p.Admin.SetSelfService(ctx, id, &on, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.p.Admin.SetSelfService(ctx, f.alpha, nil, &thirty); err != nil {
		t.Fatal(err)
	}
	f.keyA = f.p.Key(adminwire.CreateKeyRequest{TeamID: f.alpha, Name: "ci-pipeline",
		ModelAllowlist: []string{"llama-8b", "qwen-32b"}, RPM: 600, MaxStreams: 4})
	f.keyB = f.p.Key(adminwire.CreateKeyRequest{TeamID: f.beta, Name: "beta-svc"})
	f.keyC = f.p.Key(adminwire.CreateKeyRequest{TeamID: f.gamma, Name: "gamma-svc"})
	keys, err := f.p.Admin.ListKeys(ctx, f.alpha)
	if err != nil || len(keys) != 1 {
		t.Fatalf("alpha's keys: %v %v", keys, err)
	}
	f.managedA = keys[0]
	return f
}

// modelsWith calls GET /v1/models with secret: the status and the model
// ids.
func modelsWith(t *testing.T, base, secret string) (int, []string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := (&http.Client{Timeout: httpTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	var ids []string
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatal(err)
		}
		for _, m := range list.Data {
			ids = append(ids, m.ID)
		}
	}
	return resp.StatusCode, ids
}

// postForm posts form to path with the session cookie and, when set, an
// Origin header, following no redirect: the status and the page.
func postForm(t *testing.T, base, path string, cookie *http.Cookie, form url.Values, origin string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	client := &http.Client{Timeout: httpTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sessionToken reads the session's CSRF token from its keys page.
func sessionToken(t *testing.T, base string, cookie *http.Cookie) string {
	t.Helper()
	resp, body := get(t, base, "/console/keys", cookie)
	m := csrfField.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("keys page: %d, no CSRF token:\n%s", resp.StatusCode, body)
	}
	return m[1]
}

// secretField reads the secret off the created key's answer page.
var secretField = regexp.MustCompile(`id="secret">(llp_[A-Za-z0-9]+)<`)

// keyNamed returns the team's key called name.
func (f *selfServeFixture) keyNamed(t *testing.T, team int64, name string) adminwire.Key {
	t.Helper()
	keys, err := f.p.Admin.ListKeys(context.Background(), team)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == name {
			return k
		}
	}
	t.Fatalf("team %d has no key %q: %+v", team, name, keys)
	return adminwire.Key{}
}

// TestConsoleSelfServiceInBrowser: a member of a team that allows it
// makes a personal key in the browser, sees its secret once, uses it,
// revokes it, and the key is refused; limits and models above their own
// and a life past the team's bound are refused; a managed key's revoke is
// refused; another team's session cannot revoke the key; a team without
// self-service has no form and its post is refused; a post without the
// session's token or from another origin is refused; the audit page lists
// who did what, and the credit as the admin API granted it; with the
// database down the pages answer the designed 503.
func TestConsoleSelfServiceInBrowser(t *testing.T) {
	f := newSelfServeFixture(t)
	browser := newBrowser(t)
	base := f.p.URL
	tabA := newTab(t, browser)
	signIn(t, tabA, base, f.keyA)
	cookieA := sessionCookie(t, tabA, base)
	prefixA := f.managedA.Prefix

	t.Run("create, use, revoke, then the key is refused", func(t *testing.T) {
		do(t, tabA, chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.ID("newkey")))
		screenshot(t, tabA, "console-selfserve-keys.png")
		do(t, tabA,
			chromedp.SendKeys(chromedp.ID("newkey-name"), "notebook"),
			chromedp.Click(chromedp.CSS(`input[name=model][value="`+f.allowedModel+`"]`)),
			chromedp.SetValue(chromedp.CSS(`input[name=rpm]`), "60"),
			chromedp.SetValue(chromedp.ID("newkey-days"), "7"),
			chromedp.Click(chromedp.ID("newkey-create")),
			chromedp.WaitVisible(chromedp.ID("secret")))
		secret := run(t, tabA, chromedp.Text(chromedp.ID("secret")))
		if !strings.HasPrefix(secret, "llp_") {
			t.Fatalf("the answer page shows %q, want an llp_ secret", secret)
		}
		screenshot(t, tabA, "console-selfserve-created.png")
		k := f.keyNamed(t, f.alpha, "notebook")
		wantExpiry := time.Now().Add(7 * 24 * time.Hour)
		switch {
		case !strings.HasPrefix(secret, k.Prefix), k.Origin != adminwire.KeyOriginConsole, k.CreatedBy != prefixA,
			k.RPM != 60, k.MaxStreams != 4, !slices.Equal(k.ModelAllowlist, []string{f.allowedModel}),
			k.ExpiresAt == nil, k.ExpiresAt.Sub(wantExpiry).Abs() > time.Hour:
			t.Errorf("the stored key %+v: want prefix of %q, origin console, made by %s, 60 rpm, alpha's 4 streams, %s only, expiring in 7 days",
				k, secret, prefixA, f.allowedModel)
		}
		status, models := modelsWith(t, base, secret)
		if status != http.StatusOK || !slices.Equal(models, []string{f.allowedModel}) {
			t.Errorf("GET /v1/models with the new key: %d %v, want 200 with %s only", status, models, f.allowedModel)
		}
		do(t, tabA, chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.ID("keys")))
		if html := run(t, tabA, chromedp.OuterHTML(chromedp.CSS("html"))); strings.Contains(html, secret) {
			t.Error("the keys page shows the secret again")
		}
		if readonly := run(t, tabA, chromedp.Evaluate[bool](`document.getElementById('revoke-`+strconv.FormatInt(f.managedA.ID, 10)+`') === null`)); !readonly {
			t.Error("the managed key has a revoke button")
		}
		do(t, tabA, chromedp.Click(chromedp.ID("revoke-"+strconv.FormatInt(k.ID, 10))), chromedp.WaitVisible(chromedp.ID("keys")))
		eventually(t, func() string {
			if status, _ := modelsWith(t, base, secret); status != http.StatusUnauthorized {
				return "the revoked key answers " + strconv.Itoa(status) + ", want 401"
			}
			return ""
		})
		if k := f.keyNamed(t, f.alpha, "notebook"); k.RevokedAt == nil || k.RevokedBy != prefixA {
			t.Errorf("revoked key %+v: want revoked by %s", k, prefixA)
		}
	})

	tokA := sessionToken(t, base, cookieA)
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf": {tokA}, "name": {"svc"}, "days": {"7"}}
		for i := 0; i < len(kv); i += 2 {
			v[kv[i]] = []string{kv[i+1]}
		}
		return v
	}

	t.Run("models, limits and a life beyond the member's are refused", func(t *testing.T) {
		tests := []struct {
			name string
			form url.Values
			want string
		}{
			{"more requests per minute", form("rpm", "601"), "at most 600"},
			{"unlimited streams", form("max_streams", "0"), "from 1 up"},
			{"a model not declared", form("model", "gpt-9"), "not one your own"},
			{"past the team's 30 days", form("days", "31"), "1 to 30 days"},
			{"no name", form("name", " "), "Give the key a name"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				status, body := postForm(t, base, "/console/keys", cookieA, tt.form, "")
				if status != http.StatusBadRequest || !strings.Contains(body, tt.want) {
					t.Errorf("status %d, want 400 saying %q:\n%s", status, tt.want, body)
				}
			})
		}
		restricted := f.p.Key(adminwire.CreateKeyRequest{TeamID: f.alpha, Name: "llama-only", ModelAllowlist: []string{f.allowedModel}})
		client, csrf := formClient(t, base)
		if got := postSignIn(t, client, base, csrf, restricted); got != http.StatusSeeOther {
			t.Fatalf("sign-in: %d", got)
		}
		cookie := jarSession(t, client, base)
		v := form("model", f.otherOne)
		v.Set("csrf", sessionToken(t, base, cookie))
		if status, body := postForm(t, base, "/console/keys", cookie, v, ""); status != http.StatusBadRequest || !strings.Contains(body, "not one your own") {
			t.Errorf("a model outside the member's allowlist: %d, want 400:\n%s", status, body)
		}
	})

	// A second personal key of alpha's, made by a form post, for the
	// refusals below.
	status, body := postForm(t, base, "/console/keys", cookieA, form("name", "worker", "model", f.allowedModel), "")
	m := secretField.FindStringSubmatch(body)
	if status != http.StatusCreated || m == nil {
		t.Fatalf("create worker: %d\n%s", status, body)
	}
	worker := f.keyNamed(t, f.alpha, "worker")
	revokePath := func(id int64) string { return "/console/keys/" + strconv.FormatInt(id, 10) + "/revoke" }

	t.Run("a managed key's revoke is refused", func(t *testing.T) {
		status, body := postForm(t, base, revokePath(f.managedA.ID), cookieA, url.Values{"csrf": {tokA}}, "")
		if status != http.StatusForbidden || !strings.Contains(body, "managed") || !strings.Contains(body, "Terraform") {
			t.Errorf("revoke the managed key: %d, want 403 saying it is managed by Terraform:\n%s", status, body)
		}
		if k, err := f.p.Admin.GetKey(context.Background(), f.managedA.ID); err != nil || k.RevokedAt != nil {
			t.Errorf("the managed key after the refused revoke: %+v %v", k, err)
		}
	})

	t.Run("a second team's session cannot revoke the first team's key", func(t *testing.T) {
		tabB := newTab(t, browser)
		signIn(t, tabB, base, f.keyB)
		cookieB := sessionCookie(t, tabB, base)
		tokB := sessionToken(t, base, cookieB)
		status, body := postForm(t, base, revokePath(worker.ID), cookieB, url.Values{"csrf": {tokB}}, "")
		if status != http.StatusNotFound || strings.Contains(body, "worker") {
			t.Errorf("beta revoking alpha's key: %d, want 404 naming nothing of alpha's:\n%s", status, body)
		}
		if status, _ := postForm(t, base, revokePath(worker.ID), cookieB, url.Values{"csrf": {tokA}}, ""); status != http.StatusForbidden {
			t.Errorf("beta's session with alpha's token: %d, want 403", status)
		}
		if k := f.keyNamed(t, f.alpha, "worker"); k.RevokedAt != nil {
			t.Errorf("alpha's key was revoked by beta: %+v", k)
		}
		for _, page := range []string{"/console/keys", "/console/audit"} {
			do(t, tabB, chromedp.Navigate(base+page), chromedp.WaitVisible(chromedp.ID("source")))
			html := run(t, tabB, chromedp.OuterHTML(chromedp.CSS("html")))
			if s := contains(html, "worker", "notebook", "ci-pipeline", prefixA); s != "" {
				t.Errorf("beta's %s shows alpha's %q", page, s)
			}
		}
	})

	t.Run("self-service off: no form, and a post is refused", func(t *testing.T) {
		tabC := newTab(t, browser)
		signIn(t, tabC, base, f.keyC)
		do(t, tabC, chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.ID("keys")))
		if absent := run(t, tabC, chromedp.Evaluate[bool](`document.getElementById('newkey') === null`)); !absent {
			t.Error("gamma's keys page has the create form")
		}
		cookieC := sessionCookie(t, tabC, base)
		v := form()
		v.Set("csrf", sessionToken(t, base, cookieC))
		if status, body := postForm(t, base, "/console/keys", cookieC, v, ""); status != http.StatusForbidden || !strings.Contains(body, "does not allow personal keys") {
			t.Errorf("gamma's create: %d, want 403:\n%s", status, body)
		}
		if keys, _ := f.p.Admin.ListKeys(context.Background(), f.gamma); len(keys) != 1 {
			t.Errorf("gamma has %d keys, want its one", len(keys))
		}
	})

	t.Run("a missing or wrong token, or another origin, is refused", func(t *testing.T) {
		before, _ := f.p.Admin.ListKeys(context.Background(), f.alpha)
		tests := []struct {
			name, path string
			form       url.Values
			origin     string
		}{
			{"create without a token", "/console/keys", url.Values{"name": {"x"}, "days": {"7"}}, ""},
			{"create with a wrong token", "/console/keys", form("csrf", "not-"+tokA), ""},
			{"create from another origin", "/console/keys", form(), "http://evil.example"},
			{"revoke without a token", revokePath(worker.ID), url.Values{}, ""},
			{"revoke with a wrong token", revokePath(worker.ID), url.Values{"csrf": {"not-" + tokA}}, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if status, body := postForm(t, base, tt.path, cookieA, tt.form, tt.origin); status != http.StatusForbidden || !strings.Contains(body, "form expired or was not sent") {
					t.Errorf("status %d, want 403:\n%s", status, body)
				}
			})
		}
		after, _ := f.p.Admin.ListKeys(context.Background(), f.alpha)
		if len(after) != len(before) || f.keyNamed(t, f.alpha, "worker").RevokedAt != nil {
			t.Errorf("a refused post changed the keys: %d before, %d after", len(before), len(after))
		}
	})

	t.Run("the audit page says who did what, and the credit as the API granted it", func(t *testing.T) {
		do(t, tabA, chromedp.Navigate(base+"/console/audit"), chromedp.WaitVisible(chromedp.ID("audit")))
		rows := run(t, tabA, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#audit tbody tr')).map(
			tr => Array.from(tr.cells).slice(1).map(td => td.textContent).join(' | '))`))
		want := []string{
			"key created | worker " + worker.Prefix + "… (personal) | " + prefixA,
			"key revoked | notebook " + f.keyNamed(t, f.alpha, "notebook").Prefix + "… (personal) | " + prefixA,
			"key created | notebook " + f.keyNamed(t, f.alpha, "notebook").Prefix + "… (personal) | " + prefixA,
			"credit granted | 7.500000 credits · test | admin API",
		}
		for _, w := range want {
			if !slices.Contains(rows, w) {
				t.Errorf("the audit page lacks %q; it has:\n%s", w, strings.Join(rows, "\n"))
			}
		}
		bal, err := f.p.Ledger.Balance(context.Background(), f.alpha)
		if err != nil || bal.Balance != f.grantA {
			t.Errorf("the ledger's balance of alpha: %+v %v, want the %d granted", bal, err, f.grantA)
		}
		if i, j := slices.Index(rows, want[1]), slices.Index(rows, want[2]); i < 0 || j < 0 || i > j {
			t.Errorf("the audit list is not newest first:\n%s", strings.Join(rows, "\n"))
		}
		screenshot(t, tabA, "console-audit.png")
	})

	t.Run("database down: the pages and the forms answer the designed 503", func(t *testing.T) {
		f.p.PostgresProxy.Cut()
		defer f.p.PostgresProxy.Restore()
		status, header, body, err := getWithin(base+"/console/audit", cookieA, frozenAnswerBound)
		if err != nil || status != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || !strings.Contains(body, "database is not answering") {
			t.Errorf("audit with the database down: %d %v, want the designed 503:\n%s", status, err, body)
		}
		if status, body := postForm(t, base, "/console/keys", cookieA, form(), ""); status != http.StatusServiceUnavailable || !strings.Contains(body, "database is not answering") {
			t.Errorf("create with the database down: %d, want the designed 503:\n%s", status, body)
		}
	})
}
