package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Names that would run as script if a page printed them raw.
const (
	xssTeam = `<script>window.__xss="team"</script>`
	xssKey  = `<img src=x onerror="window.__xss='key'">`
)

// fixture is a platform with two teams and their usage over three days.
type fixture struct {
	t                *testing.T // the whole test, owner of what outlives a subtest
	p                *platformtest.Platform
	adminToken       string
	keyA, keyB       string
	teamA, teamB     int64
	from, to         string // the range the usage checks read, to exclusive as GET /v1/usage takes it
	last             string // the range's last day, included, as the console's to
	prefixA, prefixB string
	secretFree       []string // strings no page may show
	node1            bool     // node-1 runs (startNode1)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	tok, err := auth.GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, adminToken: tok}
	f.p = platformtest.Start(t, platformtest.Options{AdminToken: tok})
	f.p.Model("llama-8b", "llama-8b")
	f.p.Model("qwen-32b", "qwen-32b")
	f.teamA = f.p.Team("alpha", 50_000_000)
	f.teamB = f.p.Team(xssTeam, 2_000_000)
	f.keyA = f.p.Key(adminwire.CreateKeyRequest{TeamID: f.teamA, Name: "ci-pipeline", ModelAllowlist: []string{"llama-8b", "qwen-32b"}, RPM: 600})
	f.keyB = f.p.Key(adminwire.CreateKeyRequest{TeamID: f.teamB, Name: xssKey})
	keys, err := f.p.Admin.ListKeys(context.Background(), f.teamA)
	if err != nil || len(keys) != 1 {
		t.Fatalf("team alpha's keys: %v %v", keys, err)
	}
	f.prefixA = keys[0].Prefix
	now := time.Now().UTC()
	day := 24 * time.Hour
	// Alpha used both models on three days; the other team one model with
	// counts no alpha row has.
	rows := []struct {
		team       int64
		key        int64
		model      string
		at         time.Time
		prompt     int64
		completion int64
	}{
		{f.teamA, keys[0].ID, "llama-8b", now.Add(-2 * day), 1200, 300},
		{f.teamA, keys[0].ID, "llama-8b", now.Add(-2 * day), 800, 200},
		{f.teamA, keys[0].ID, "qwen-32b", now.Add(-day), 5000, 1500},
		{f.teamA, keys[0].ID, "llama-8b", now.Add(-day), 600, 150},
		{f.teamA, keys[0].ID, "llama-8b", now, 400, 100},
		{f.teamB, 0, "llama-8b", now.Add(-day), 777_001, 777_002},
	}
	for i, r := range rows {
		cost := (r.prompt*platformtest.PromptPrice + r.completion*platformtest.CompletionPrice) / 1_000_000
		var key any
		if r.key != 0 {
			key = r.key
		}
		if _, err := f.p.DB.ExecContext(context.Background(), `INSERT INTO usage_ledger (request_id, team_id, key_id, model,
			prompt_tokens, completion_tokens, reserved_microcredits, cost_microcredits, status, settled_from, created_at, settled_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'settled', 'exact', $9, $9)`,
			fmt.Sprintf("console-%d", i), r.team, key, r.model, r.prompt, r.completion, cost+1, cost, r.at); err != nil {
			t.Fatal(err)
		}
	}
	f.from = now.Add(-3 * day).Format(time.DateOnly)
	f.to = now.Add(day).Format(time.DateOnly)
	f.last = now.Format(time.DateOnly)
	f.secretFree = []string{f.keyA, f.keyB, f.adminToken}
	return f
}

// apiUsage reads GET /v1/usage for the range with key.
func (f *fixture) apiUsage(t *testing.T, key string) gateway.UsageReport {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.p.URL+"/v1/usage?from="+f.from+"&to="+f.to, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{Timeout: httpTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep gateway.UsageReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/usage: %d %v", resp.StatusCode, err)
	}
	return rep
}

// pageRow is one row of the usage page's per-model table.
type pageRow struct {
	Model                              string
	Requests, Prompt, Completion, Cost int64
}

// readTotals reads the usage page's per-model table in the browser.
func readTotals(t *testing.T, tab context.Context) []pageRow {
	t.Helper()
	return run(t, tab, chromedp.Evaluate[[]pageRow](`Array.from(document.querySelectorAll('#totals tbody tr')).map(tr => ({
		Model: tr.dataset.model, Requests: +tr.dataset.requests, Prompt: +tr.dataset.prompt,
		Completion: +tr.dataset.completion, Cost: +tr.dataset.cost}))`))
}

// chartsDrawn reports whether both chart images loaded and have a size.
const chartsDrawn = `['chart-tokens','chart-cost'].every(id => {
	const img = document.getElementById(id); return img && img.complete && img.naturalWidth > 0 })`

func TestConsoleInBrowser(t *testing.T) {
	f := newFixture(t)
	browser := newBrowser(t)
	base := f.p.URL

	t.Run("team signs in and the usage page matches the usage API", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, base, f.keyA)
		do(t, tab, chromedp.Navigate(base+"/console/usage?from="+f.from+"&to="+f.last), chromedp.WaitVisible(chromedp.ID("totals")))
		got := readTotals(t, tab)
		want := []pageRow{}
		for _, e := range f.apiUsage(t, f.keyA).Data {
			want = append(want, pageRow{e.Model, e.Requests, e.PromptTokens, e.CompletionTokens, e.CostMicrocredits})
		}
		if len(want) != 2 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("usage page rows %v, GET /v1/usage %v (want two models)", got, want)
		}
		eventually(t, func() string {
			if run(t, tab, chromedp.Evaluate[bool](chartsDrawn)) {
				return ""
			}
			return "the usage charts did not load"
		})
		checkGlance(t, f, tab, f.keyA, f.teamA)
		checkCharts(t, f, tab, got)
		checkDateFields(t, tab, f.from, f.last)
		// The charts and the CSV link read the page's range, not the default.
		links := run(t, tab, chromedp.Evaluate[[]string](`['chart-tokens','chart-cost','csv'].map(id => {
			const e = document.getElementById(id); return e.src || e.href })`))
		for _, l := range links {
			if !strings.Contains(l, "from="+f.from+"&to="+f.last) {
				t.Errorf("%s does not carry the page's range %s to %s", l, f.from, f.last)
			}
		}
		days := run(t, tab, chromedp.Evaluate[int](`document.querySelectorAll('#days tbody tr').length`))
		if days != 4 {
			t.Errorf("per-day table has %d rows, want 4 (llama-8b on three days, qwen-32b on one)", days)
		}
		html := run(t, tab, chromedp.OuterHTML(chromedp.CSS("html")))
		if s := contains(html, f.secretFree...); s != "" {
			t.Errorf("the usage page shows a secret")
		}
		if !strings.Contains(html, "Source: settled rows of the credit ledger") || !strings.Contains(html, "Read at ") {
			t.Error("the usage page does not say where its numbers come from and when they were read")
		}
		cookie := sessionCookie(t, tab, base)
		resp, csv := get(t, base, "/console/usage.csv?from="+f.from+"&to="+f.last, cookie)
		if resp.StatusCode != http.StatusOK || strings.Count(csv, "\n") != 5 || !strings.Contains(csv, ",qwen-32b,1,5000,1500,") {
			t.Errorf("CSV download: %d\n%s", resp.StatusCode, csv)
		}
		screenshot(t, tab, "console-usage.png")
	})

	t.Run("keys show prefixes and never secrets", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, base, f.keyA)
		do(t, tab, chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.ID("keys")))
		html := run(t, tab, chromedp.OuterHTML(chromedp.CSS("html")))
		if !strings.Contains(html, f.prefixA) || !strings.Contains(html, "ci-pipeline") || !strings.Contains(html, "llama-8b, qwen-32b") {
			t.Errorf("the keys page lacks the key's prefix, name or allowlist:\n%s", html)
		}
		if s := contains(html, f.secretFree...); s != "" {
			t.Error("the keys page shows a secret")
		}
		lastUsed := run(t, tab, chromedp.Text(chromedp.CSS("#keys tbody tr td:last-child")))
		if !strings.HasPrefix(lastUsed, time.Now().UTC().Format("2006-01-02")) {
			t.Errorf("last used %q, want today", lastUsed)
		}
		do(t, tab, chromedp.Navigate(base+"/console/balance"), chromedp.WaitVisible(chromedp.ID("available")))
		if got := run(t, tab, chromedp.Text(chromedp.ID("available"))); got != "50.000000" {
			t.Errorf("available %q, want the 50 credits granted", got)
		}
	})

	t.Run("the keys page counts each key's 429s as the API answered them", func(t *testing.T) {
		checkKeyRefusals(t, f, browser, base)
	})

	t.Run("sign-out ends the session everywhere", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, base, f.keyA)
		cookie := sessionCookie(t, tab, base)
		if resp, _ := get(t, base, "/console/usage", cookie); resp.StatusCode != http.StatusOK {
			t.Fatalf("with the session cookie /console/usage answers %d", resp.StatusCode)
		}
		do(t, tab, chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("credential")))
		resp, _ := get(t, base, "/console/usage", cookie)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/signin" {
			t.Errorf("after sign-out the old cookie gets %d to %q, want a redirect to sign in", resp.StatusCode, resp.Header.Get("Location"))
		}
	})

	t.Run("a second team sees none of the first team's rows and names render as text", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, base, f.keyB)
		if got := run(t, tab, chromedp.Text(chromedp.ID("team-name"))); got != xssTeam {
			t.Errorf("team name shows as %q, want the literal %q", got, xssTeam)
		}
		do(t, tab, chromedp.Navigate(base+"/console/usage?from="+f.from+"&to="+f.last), chromedp.WaitVisible(chromedp.ID("totals")))
		checkGlance(t, f, tab, f.keyB, f.teamB)
		got := readTotals(t, tab)
		if len(got) != 1 || got[0].Prompt != 777_001 || got[0].Completion != 777_002 {
			t.Errorf("second team's usage rows %v, want only its own llama-8b row", got)
		}
		for _, page := range []string{"/console/usage?from=" + f.from + "&to=" + f.last, "/console/keys", "/console/balance"} {
			do(t, tab, chromedp.Navigate(base+page), chromedp.WaitVisible(chromedp.ID("source")))
			html := run(t, tab, chromedp.OuterHTML(chromedp.CSS("html")))
			if s := contains(html, "alpha", "ci-pipeline", f.prefixA, "qwen-32b", "50.000000"); s != "" {
				t.Errorf("%s shows the first team's %q", page, s)
			}
		}
		do(t, tab, chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.ID("keys")))
		if got := run(t, tab, chromedp.Text(chromedp.CSS("#keys .key-name"))); got != xssKey {
			t.Errorf("key name shows as %q, want the literal %q", got, xssKey)
		}
		if ran := run(t, tab, chromedp.Evaluate[bool](`window.__xss !== undefined`)); ran {
			t.Error("a name ran as script")
		}
		if resp, _ := get(t, base, "/console/platform/nodes", sessionCookie(t, tab, base)); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a team's session opens the platform pages: %d", resp.StatusCode)
		}
	})

	t.Run("headers forbid inline script, framing and caching", func(t *testing.T) {
		resp, _ := get(t, base, "/console/signin", nil)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("CSP %q lacks %q", csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("CSP %q allows inline code", csp)
		}
		if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("X-Frame-Options %q", got)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("Cache-Control %q", got)
		}
	})

	t.Run("the GPU-hours page matches the ledger and the cost report", func(t *testing.T) {
		checkCostPage(t, f, browser, base)
	})

	t.Run("admin sees nodes and a drain", func(t *testing.T) {
		f.startNode1()
		tab := newTab(t, browser)
		signIn(t, tab, base, f.adminToken)
		do(t, tab, chromedp.Navigate(base+"/console/platform/nodes"), chromedp.WaitVisible(chromedp.ID("nodes")))
		state := `document.querySelector('#nodes tr[data-node="node-1"] .state')?.textContent ?? ''`
		if got := run(t, tab, chromedp.Evaluate[string](state)); got != "serving" {
			t.Errorf("node-1 shows %q, want serving", got)
		}
		screenshot(t, tab, "console-nodes.png")
		req, _ := http.NewRequest(http.MethodPost, base+"/admin/nodes/node-1/drain", nil)
		req.Header.Set("Authorization", "Bearer "+f.adminToken)
		resp, err := (&http.Client{Timeout: httpTimeout}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("drain: %d", resp.StatusCode)
		}
		eventually(t, func() string {
			do(t, tab, chromedp.Navigate(base+"/console/platform/nodes"), chromedp.WaitVisible(chromedp.ID("nodes")))
			// An idle node finishes its drain at once: either word shows it.
			if got := run(t, tab, chromedp.Evaluate[string](state)); got != "draining" && got != "drained" {
				return "node-1 shows " + got + " after the drain, want draining or drained"
			}
			return ""
		})
		do(t, tab, chromedp.Navigate(base+"/console/platform/teams"), chromedp.WaitVisible(chromedp.ID("teams")))
		if got := run(t, tab, chromedp.Text(chromedp.ID("teams"))); !strings.Contains(got, "alpha") || !strings.Contains(got, xssTeam) {
			t.Errorf("the teams page lacks a team:\n%s", got)
		}
	})

	t.Run("the nodes page lists a thousand nodes", func(t *testing.T) {
		const n = 1000
		for i := range n - 1 { // node-1 is running already
			loc := []string{"cloud", "onprem"}[i%2]
			if _, err := f.p.DB.ExecContext(context.Background(), `INSERT INTO nodes (id, location, gpus, gpu_model, models, state)
				VALUES ($1, $2, 1, 'L4', '[{"name":"llama-8b"}]', 'active')`, fmt.Sprintf("bulk-%04d", i), loc); err != nil {
				t.Fatal(err)
			}
		}
		tab := newTab(t, browser)
		signIn(t, tab, base, f.adminToken)
		do(t, tab, chromedp.Navigate(base+"/console/platform/nodes"), chromedp.WaitVisible(chromedp.ID("nodes")))
		if got := run(t, tab, chromedp.Evaluate[int](`document.querySelectorAll('#nodes tbody tr').length`)); got != n {
			t.Errorf("the nodes page lists %d nodes, want %d", got, n)
		}
		if got := run(t, tab, chromedp.Text(chromedp.ID("summary"))); !strings.HasPrefix(got, "1000 nodes registered") {
			t.Errorf("summary %q", got)
		}
	})

	t.Run("sign-in refuses a forged form and too many failures with one credential", func(t *testing.T) {
		client, csrf := formClient(t, base)
		if got := postSignIn(t, client, base, "not-"+csrf, f.keyA); got != http.StatusForbidden {
			t.Errorf("sign-in with a wrong CSRF token: %d, want 403", got)
		}
		last := 0
		for range 12 {
			last = postSignIn(t, client, base, csrf, "llp_wrong")
		}
		if last != http.StatusTooManyRequests {
			t.Errorf("the 12th attempt with one wrong credential: %d, want 429", last)
		}
	})
}
