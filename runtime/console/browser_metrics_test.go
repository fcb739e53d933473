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
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/quota"
)

// metricsFixture is a platform with a served llama-8b, two teams whose
// keys sent real requests through the gateway (timed, and refused), and a
// few older timed rows of alpha's on qwen-32b with known latencies.
type metricsFixture struct {
	p                   *platformtest.Platform
	adminToken          string
	alpha, beta         int64
	search, chat, betaK string // the keys' secrets
	from, to            string
	// last is to's day before: the console's ranges include their last day.
	last string
	// statuses counts what the chat API answered each team.
	statuses map[int64]map[int]int64
}

// knownTTFT is the TTFT of alpha's four older qwen-32b rows: all in the
// [100, 200) ms bucket, so the page's p50 is 150 ms and its p95 200 ms.
const knownTTFT = 120

func newMetricsFixture(t *testing.T) *metricsFixture {
	t.Helper()
	tok, err := auth.GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	f := &metricsFixture{adminToken: tok, statuses: map[int64]map[int]int64{}}
	f.p = platformtest.Start(t, platformtest.Options{AdminToken: tok, Proxied: true})
	f.p.Model("llama-8b", "llama-8b")
	f.p.Model("qwen-32b", "qwen-32b")
	f.alpha = f.p.Team("alpha", 50_000_000)
	f.beta = f.p.Team("beta", 5_000_000)
	f.search = f.p.Key(adminwire.CreateKeyRequest{TeamID: f.alpha, Name: "svc-search", RPM: 1})
	f.chat = f.p.Key(adminwire.CreateKeyRequest{TeamID: f.alpha, Name: "svc-chat"})
	f.betaK = f.p.Key(adminwire.CreateKeyRequest{TeamID: f.beta, Name: "beta-svc"})
	f.p.StartNode("node-1", "llama-8b", enginesim.Config{ServedModelName: "llama-8b", Seed: 1, TimeScale: 20}, 8)
	for _, r := range []struct {
		team int64
		key  string
	}{{f.alpha, f.search}, {f.alpha, f.search}, {f.alpha, f.chat}, {f.alpha, f.chat}, {f.beta, f.betaK}} {
		f.chatRequest(t, r.team, r.key)
	}
	if got := f.statuses[f.alpha]; got[http.StatusOK] != 3 || got[http.StatusTooManyRequests] != 1 {
		t.Fatalf("alpha's requests answered %v, want three 200 and one 429 (the 1-per-minute key's second)", got)
	}
	keys, err := f.p.Admin.ListKeys(context.Background(), f.alpha)
	if err != nil {
		t.Fatal(err)
	}
	var chatID int64
	for _, k := range keys {
		if k.Name == "svc-chat" {
			chatID = k.ID
		}
	}
	now := time.Now().UTC()
	for i := range 4 {
		at := now.Add(-2 * 24 * time.Hour)
		if _, err := f.p.DB.ExecContext(context.Background(), `INSERT INTO usage_ledger (request_id, team_id, key_id, model,
			prompt_tokens, completion_tokens, reserved_microcredits, cost_microcredits, status, settled_from, created_at, settled_at,
			ttft_ms, generation_ms, queue_ms) VALUES ($1, $2, $3, 'qwen-32b', 1000, 200, 900, 800, 'settled', 'exact', $4, $4, $5, 4000, 0)`,
			fmt.Sprintf("older-%d", i), f.alpha, chatID, at, knownTTFT); err != nil {
			t.Fatal(err)
		}
	}
	f.from, f.to = now.Add(-3*24*time.Hour).Format(time.DateOnly), now.Add(24*time.Hour).Format(time.DateOnly)
	f.last = now.Format(time.DateOnly)
	f.p.Settled()
	return f
}

// chatRequest sends one small chat completion with key and counts its
// answer's status for team.
func (f *metricsFixture) chatRequest(t *testing.T, team int64, key string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.p.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"llama-8b","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: httpTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	platformtest.Discard(resp)
	if f.statuses[team] == nil {
		f.statuses[team] = map[int]int64{}
	}
	f.statuses[team][resp.StatusCode]++
}

// apiUsage reads GET /v1/usage for the fixture's range with key.
func (f *metricsFixture) apiUsage(t *testing.T, key string) gateway.UsageReport {
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

// keyUsageRow is a row of the per-key usage table.
type keyUsageRow struct {
	Key                                int64
	Model                              string
	Requests, Prompt, Completion, Cost int64
}

// latencyRow is a row of a latency or SLI table; -1 is a figure not known.
type latencyRow struct {
	Key                           int64
	Model                         string
	Requests, Timed               int64
	P50, P95, Queue95, R429, R503 int64
}

// readLatency reads the rows of the latency table id.
func readLatency(t *testing.T, tab context.Context, id string) []latencyRow {
	t.Helper()
	return run(t, tab, chromedp.Evaluate[[]latencyRow](`Array.from(document.querySelectorAll('#`+id+` tbody tr')).map(tr => ({
		Key: +(tr.dataset.key ?? 0), Model: tr.dataset.model, Requests: +tr.dataset.requests, Timed: +tr.dataset.timed,
		P50: +tr.dataset.ttftP50, P95: +tr.dataset.ttftP95, Queue95: +tr.dataset.queueP95,
		R429: +(tr.dataset['429'] ?? 0), R503: +(tr.dataset['503'] ?? 0)}))`))
}

// wantLatency is what a latency table must show for rows read from the
// ledger: the same percentiles, in whole milliseconds.
func wantLatency(rows []ledger.Latency) []latencyRow {
	ms := func(h ledger.Histogram, q float64) int64 {
		if d, ok := h.Quantile(q); ok {
			return d.Milliseconds()
		}
		return -1
	}
	out := []latencyRow{}
	for _, l := range rows {
		out = append(out, latencyRow{Key: l.KeyID, Model: l.Model, Requests: l.Requests, Timed: l.Timed,
			P50: ms(l.TTFT, 0.5), P95: ms(l.TTFT, 0.95), Queue95: ms(l.QueueWait, 0.95)})
	}
	return out
}

// TestConsoleMetricsInBrowser: the per-key usage page and its CSV, the
// team's latency and errors page and the platform's SLI page, in
// Chromium, each checked against the usage API, the ledger's queries and
// the statuses the chat API answered for the same range; their empty
// states; the second team's isolation; and the designed 503 page with
// PostgreSQL down.
func TestConsoleMetricsInBrowser(t *testing.T) {
	f := newMetricsFixture(t)
	browser := newBrowser(t)
	base := f.p.URL
	ctx := context.Background()
	from, _ := time.Parse(time.DateOnly, f.from)
	to, _ := time.Parse(time.DateOnly, f.to)
	rangeQ := "?from=" + f.from + "&to=" + f.last
	alphaTab := newTab(t, browser)
	signIn(t, alphaTab, base, f.chat)

	t.Run("usage per key matches the ledger and sums to the usage API", func(t *testing.T) {
		tab := alphaTab
		do(t, tab, chromedp.Navigate(base+"/console/usage/keys"+rangeQ), chromedp.WaitVisible(chromedp.ID("keys-usage")))
		// The form shows the range as asked (its last day included, as on
		// the usage page), so Show asks for the same range again.
		for _, page := range []string{"/console/usage/keys", "/console/latency"} {
			do(t, tab, chromedp.Navigate(base+page+rangeQ), chromedp.WaitVisible(chromedp.ID("show")))
			shown := run(t, tab, chromedp.Evaluate[[]string](`[document.getElementById('from').value, document.getElementById('to').value]`))
			if shown[0] != f.from || shown[1] != f.last {
				t.Errorf("%s%s: the form shows %v, want [%s %s]", page, rangeQ, shown, f.from, f.last)
			}
		}
		do(t, tab, chromedp.Navigate(base+"/console/usage/keys"+rangeQ), chromedp.WaitVisible(chromedp.ID("keys-usage")))
		got := run(t, tab, chromedp.Evaluate[[]keyUsageRow](`Array.from(document.querySelectorAll('#keys-usage tbody tr')).map(tr => ({
			Key: +tr.dataset.key, Model: tr.dataset.model, Requests: +tr.dataset.requests, Prompt: +tr.dataset.prompt,
			Completion: +tr.dataset.completion, Cost: +tr.dataset.cost}))`))
		byKey, err := f.p.Ledger.UsageByKey(ctx, f.alpha, from, to)
		if err != nil {
			t.Fatal(err)
		}
		want := []keyUsageRow{}
		for _, u := range byKey {
			want = append(want, keyUsageRow{u.KeyID, u.Model, u.Requests, u.PromptTokens, u.CompletionTokens, u.CostMicrocredits})
		}
		if len(want) != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("per-key rows %v, the ledger's UsageByKey %v (want svc-search and svc-chat on llama-8b, svc-chat on qwen-32b)", got, want)
		}
		perModel := map[string]keyUsageRow{}
		for _, r := range got {
			m := perModel[r.Model]
			m.Model, m.Requests, m.Prompt, m.Completion, m.Cost = r.Model, m.Requests+r.Requests, m.Prompt+r.Prompt, m.Completion+r.Completion, m.Cost+r.Cost
			perModel[r.Model] = m
		}
		for _, e := range f.apiUsage(t, f.chat).Data {
			if m := perModel[e.Model]; m.Requests != e.Requests || m.Prompt != e.PromptTokens || m.Completion != e.CompletionTokens || m.Cost != e.CostMicrocredits {
				t.Errorf("%s summed over keys %+v, GET /v1/usage says %+v", e.Model, m, e)
			}
			delete(perModel, e.Model)
		}
		if len(perModel) != 0 {
			t.Errorf("models on the page that GET /v1/usage lacks: %v", perModel)
		}
		html := run(t, tab, chromedp.OuterHTML(chromedp.CSS("html")))
		for _, s := range []string{"svc-search", "svc-chat", "Source: settled rows of the credit ledger per API key"} {
			if !strings.Contains(html, s) {
				t.Errorf("the per-key page lacks %q", s)
			}
		}
		if s := contains(html, f.search, f.chat, f.betaK, f.adminToken, "beta-svc"); s != "" {
			t.Errorf("the per-key page shows %q", s)
		}
		resp, csv := get(t, base, "/console/usage/keys.csv"+rangeQ, sessionCookie(t, tab, base))
		if resp.StatusCode != http.StatusOK || strings.Count(csv, "\n") != 4 || !strings.Contains(csv, ",svc-chat,qwen-32b,4,4000,800,3200") {
			t.Errorf("per-key CSV: %d\n%s", resp.StatusCode, csv)
		}
		screenshot(t, tab, "console-usage-keys.png")
	})

	t.Run("latency and errors match the ledger and the API's answers", func(t *testing.T) {
		tab := alphaTab
		do(t, tab, chromedp.Navigate(base+"/console/latency"+rangeQ), chromedp.WaitVisible(chromedp.ID("latency-models")))
		for _, g := range []struct {
			id    string
			group ledger.LatencyGroup
		}{{"latency-models", ledger.ByModel}, {"latency-keys", ledger.ByKeyAndModel}} {
			rows, err := f.p.Ledger.TeamLatency(ctx, f.alpha, from, to, g.group)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := readLatency(t, tab, g.id), wantLatency(rows); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("#%s rows %v, the ledger's TeamLatency %v", g.id, got, want)
			}
		}
		models := readLatency(t, tab, "latency-models")
		if len(models) != 2 || models[0].Model != "llama-8b" || models[0].Timed != 3 || models[0].P50 < 0 ||
			models[1].Model != "qwen-32b" || models[1].P50 != 150 || models[1].P95 != 200 || models[1].Queue95 != 10 {
			t.Errorf("per model %+v: want llama-8b's three live requests timed, qwen-32b's p50 150 ms, p95 200 ms, queue p95 10 ms", models)
		}
		type refusal struct{ Status, Count int64 }
		got := run(t, tab, chromedp.Evaluate[[]refusal](`Array.from(document.querySelectorAll('#refusals tbody tr')).map(tr => ({
			Status: +tr.dataset.status, Count: +tr.dataset.count}))`))
		sum := map[int]int64{}
		for _, r := range got {
			sum[int(r.Status)] += r.Count
		}
		for _, status := range []int{http.StatusPaymentRequired, http.StatusTooManyRequests, http.StatusServiceUnavailable} {
			if sum[status] != f.statuses[f.alpha][status] {
				t.Errorf("the page counts %d refusals with %d, the chat API answered %d", sum[status], status, f.statuses[f.alpha][status])
			}
		}
		if reason := run(t, tab, chromedp.Evaluate[string](`document.querySelector('#refusals tr[data-status="429"]')?.dataset.reason ?? ''`)); reason != "rpm" {
			t.Errorf("the 429's reason shows as %q, want rpm", reason)
		}
		screenshot(t, tab, "console-latency.png")
	})

	t.Run("empty range", func(t *testing.T) {
		tab := alphaTab
		const old = "?from=2020-01-01&to=2020-02-01"
		do(t, tab, chromedp.Navigate(base+"/console/usage/keys"+old), chromedp.WaitVisible(chromedp.ID("empty")))
		do(t, tab, chromedp.Navigate(base+"/console/latency"+old), chromedp.WaitVisible(chromedp.ID("empty")), chromedp.WaitVisible(chromedp.ID("no-refusals")))
	})

	t.Run("the second team sees only its own", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, base, f.betaK)
		for _, page := range []string{"/console/usage/keys" + rangeQ, "/console/latency" + rangeQ} {
			do(t, tab, chromedp.Navigate(base+page), chromedp.WaitVisible(chromedp.ID("source")))
			html := run(t, tab, chromedp.OuterHTML(chromedp.CSS("html")))
			if s := contains(html, "alpha", "svc-search", "svc-chat", "qwen-32b", `data-status="429"`); s != "" {
				t.Errorf("%s shows the first team's %q", page, s)
			}
		}
		rows := readLatency(t, tab, "latency-models")
		if len(rows) != 1 || rows[0].Requests != 1 || rows[0].Timed != 1 {
			t.Errorf("beta's latency rows %+v, want its one request", rows)
		}
		cookie := sessionCookie(t, tab, base)
		if _, csv := get(t, base, "/console/usage/keys.csv"+rangeQ, cookie); strings.Contains(csv, "svc-") || strings.Count(csv, "\n") != 2 {
			t.Errorf("beta's per-key CSV:\n%s", csv)
		}
		if resp, _ := get(t, base, "/console/platform/slis", cookie); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a team's session opens the SLI page: %d", resp.StatusCode)
		}
	})

	t.Run("the platform's SLIs match the ledger and the refusal counts", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, base, f.adminToken)
		do(t, tab, chromedp.Navigate(base+"/console/platform/slis"), chromedp.WaitVisible(chromedp.ID("slis-hour")))
		now := time.Now()
		for _, w := range []struct {
			id   string
			span time.Duration
		}{{"hour", time.Hour}, {"day", 24 * time.Hour}} {
			rows, err := f.p.Ledger.PlatformLatency(ctx, now.Add(-w.span), now)
			if err != nil {
				t.Fatal(err)
			}
			want := wantLatency(rows)
			got := readLatency(t, tab, "slis-"+w.id)
			for i := range got {
				got[i].R429, got[i].R503 = 0, 0 // checked below
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("#slis-%s rows %v, the ledger's PlatformLatency %v", w.id, got, want)
			}
			if len(got) != 1 || got[0].Requests != 4 {
				t.Errorf("#slis-%s: want llama-8b's four live requests of both teams (the older rows are days old): %v", w.id, got)
			}
		}
		counts, err := quota.ReadPlatformRefusals(ctx, f.p.Redis.Client(), quota.NewKeys(f.p.Redis.Prefix), now.Add(-time.Hour), now)
		if err != nil {
			t.Fatal(err)
		}
		var n429 int64
		for _, c := range counts {
			if c.Status == http.StatusTooManyRequests {
				n429 += c.Count
			}
		}
		shown := run(t, tab, chromedp.Evaluate[int64](`Array.from(document.querySelectorAll('#unattributed-hour tr[data-status="429"]')).reduce((s, tr) => s + +tr.dataset.count, 0)`))
		if n429 != f.statuses[f.alpha][http.StatusTooManyRequests] || shown != n429 {
			t.Errorf("429s in the last hour: page %d, Redis %d, the chat API answered %d", shown, n429, f.statuses[f.alpha][http.StatusTooManyRequests])
		}
		screenshot(t, tab, "console-slis.png")
	})

	t.Run("PostgreSQL down: the designed 503 page", func(t *testing.T) {
		admin := newTab(t, browser)
		signIn(t, admin, base, f.adminToken)
		sessions := map[string]*http.Cookie{"team": sessionCookie(t, alphaTab, base), "admin": sessionCookie(t, admin, base)}
		f.p.PostgresProxy.Cut()
		defer f.p.PostgresProxy.Restore()
		pages := []struct{ who, path string }{
			{"team", "/console/usage/keys" + rangeQ}, {"team", "/console/usage/keys.csv" + rangeQ},
			{"team", "/console/latency" + rangeQ}, {"admin", "/console/platform/slis"},
		}
		for _, pg := range pages {
			resp, body := get(t, base, pg.path, sessions[pg.who])
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "database is not answering") {
				t.Errorf("%s with PostgreSQL down: %d (Retry-After %q)\n%s", pg.path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
		}
		do(t, alphaTab, chromedp.Navigate(base+"/console/latency"+rangeQ), chromedp.WaitVisible(chromedp.ID("problem")))
		if got := run(t, alphaTab, chromedp.Text(chromedp.ID("problem"))); !strings.Contains(got, "database is not answering") {
			t.Errorf("the latency page with PostgreSQL down says %q", got)
		}
	})
}
