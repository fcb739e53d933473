package console_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
)

// getJSON reads path from the platform's API with the bearer credential
// into v, strictly.
func (f *fixture) getJSON(t *testing.T, path, cred string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.p.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := (&http.Client{Timeout: httpTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
}

// glanceTotals sums GET /v1/usage over [from, to) for the key's team.
func (f *fixture) glanceTotals(t *testing.T, key, from, to string) (cost, requests, tokens int64) {
	t.Helper()
	var rep gateway.UsageReport
	f.getJSON(t, "/v1/usage?from="+url.QueryEscape(from)+"&to="+url.QueryEscape(to), key, &rep)
	for _, e := range rep.Data {
		cost, requests, tokens = cost+e.CostMicrocredits, requests+e.Requests, tokens+e.TotalTokens
	}
	return cost, requests, tokens
}

// checkGlance reads the usage page's headline in the tab and checks it
// against the API: each figure's range derives from the page's now as the
// page says (this month so far, the same stretch of last month, last month
// whole, the 7 days before now), GET /v1/usage for that range gives its
// spend, requests and tokens, the projection is this month's spend plus
// the 7 days' rate for the rest of the month, and the available balance
// is the one GET /admin/teams/{id} answers.
func checkGlance(t *testing.T, f *fixture, tab context.Context, key string, teamID int64) {
	t.Helper()
	page := run(t, tab, chromedp.Evaluate[map[string]map[string]string](`Object.fromEntries(
		['glance','g-spend','g-spend-vs','g-last','g-projected','g-balance'].map(id => [id, {...document.getElementById(id).dataset}]))`))
	now, err := time.Parse(time.RFC3339Nano, page["glance"]["now"])
	if err != nil {
		t.Fatalf("the headline's now %q: %v", page["glance"]["now"], err)
	}
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	lastStart := monthStart.AddDate(0, -1, 0)
	sameEnd := lastStart.Add(now.Sub(monthStart))
	if sameEnd.After(monthStart) {
		sameEnd = monthStart
	}
	exact := func(tm time.Time) string { return tm.UTC().Format(time.RFC3339Nano) }
	wantRanges := map[string][2]string{
		"g-spend":     {exact(monthStart), exact(now)},
		"g-spend-vs":  {exact(lastStart), exact(sameEnd)},
		"g-last":      {exact(lastStart), exact(monthStart)},
		"g-projected": {exact(now.Add(-7 * 24 * time.Hour)), exact(now)},
	}
	costs := map[string]int64{}
	for id, r := range wantRanges {
		got := page[id]
		if got["from"] != r[0] || got["to"] != r[1] {
			t.Errorf("%s covers %s to %s, want %s to %s (now %s)", id, got["from"], got["to"], r[0], r[1], now)
			continue
		}
		cost, requests, tokens := f.glanceTotals(t, key, r[0], r[1])
		costs[id] = cost
		if got["cost"] != fmt.Sprint(cost) {
			t.Errorf("%s spend %s, GET /v1/usage for its range %d", id, got["cost"], cost)
		}
		if _, ok := got["requests"]; ok && (got["requests"] != fmt.Sprint(requests) || got["tokens"] != fmt.Sprint(tokens)) {
			t.Errorf("%s requests/tokens %s/%s, GET /v1/usage for its range %d/%d", id, got["requests"], got["tokens"], requests, tokens)
		}
	}
	daysLeft := float64(monthStart.AddDate(0, 1, 0).Sub(now)) / float64(24*time.Hour)
	want := costs["g-spend"] + int64(math.Round(float64(costs["g-projected"])/7*daysLeft))
	if got := page["g-projected"]["projected"]; got != fmt.Sprint(want) {
		t.Errorf("projected month-end %s, want this month's %d plus the last 7 days' %d / 7 × %.3f days = %d",
			got, costs["g-spend"], costs["g-projected"], daysLeft, want)
	}
	var team adminwire.Team
	f.getJSON(t, fmt.Sprintf("/admin/teams/%d", teamID), f.adminToken, &team)
	if got := page["g-balance"]["available"]; got != fmt.Sprint(team.AvailableMicrocredits) {
		t.Errorf("available balance %s, GET /admin/teams/%d %d", got, teamID, team.AvailableMicrocredits)
	}
}

// chartBar is a bar segment of a usage chart.
type chartBar struct {
	Model string  `xml:"data-model,attr"`
	Value float64 `xml:"data-value,attr"`
	Fill  string  `xml:"fill,attr"`
}

// checkCharts fetches both charts of the range with the tab's session and
// checks them against the page's per-model table: the bars of a model sum
// to its tokens and cost, and are drawn in the colour of its swatch; no
// element carries an inline style.
func checkCharts(t *testing.T, f *fixture, tab context.Context, rows []pageRow) {
	t.Helper()
	colors := run(t, tab, chromedp.Evaluate[map[string]string](`Object.fromEntries(Array.from(
		document.querySelectorAll('#totals tbody tr')).map(tr => [tr.dataset.model, tr.querySelector('svg.swatch rect').getAttribute('fill')]))`))
	cookie := sessionCookie(t, tab, f.p.URL)
	for _, metric := range []string{"tokens", "cost"} {
		resp, body := get(t, f.p.URL, "/console/usage.svg?from="+f.from+"&to="+f.last+"&metric="+metric, cookie)
		if resp.StatusCode != http.StatusOK || strings.Contains(body, "style=") {
			t.Errorf("the %s chart: %d, or with an inline style:\n%.400s", metric, resp.StatusCode, body)
			continue
		}
		var doc struct {
			Rects []chartBar `xml:"rect"`
		}
		if err := xml.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("the %s chart is not XML: %v", metric, err)
		}
		sums := map[string]float64{}
		for _, r := range doc.Rects {
			if r.Model == "" {
				continue
			}
			sums[r.Model] += r.Value
			if r.Fill != colors[r.Model] {
				t.Errorf("a %s bar of %s is %s, its swatch %s", metric, r.Model, r.Fill, colors[r.Model])
			}
		}
		for _, row := range rows {
			want := float64(row.Prompt + row.Completion)
			if metric == "cost" {
				want = float64(row.Cost) / 1e6
			}
			if math.Abs(sums[row.Model]-want) > 1e-9*math.Max(1, want) {
				t.Errorf("the %s chart's %s bars sum to %v, the table says %v", metric, row.Model, sums[row.Model], want)
			}
		}
	}
	if colors["llama-8b"] == "" || colors["llama-8b"] == colors["qwen-32b"] {
		t.Errorf("swatches %v: want a colour per model", colors)
	}
}

// checkDateFields checks the range's fields show ISO dates, as the tables
// do, whatever the browser's locale: text fields holding YYYY-MM-DD.
func checkDateFields(t *testing.T, tab context.Context, from, last string) {
	t.Helper()
	got := run(t, tab, chromedp.Evaluate[[]string](`['from','to'].flatMap(id => {
		const e = document.getElementById(id); return [e.type, e.value, e.pattern] })`))
	want := []string{"text", from, `\d{4}-\d{2}-\d{2}`, "text", last, `\d{4}-\d{2}-\d{2}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("date fields (type, value, pattern) %q, want %q", got, want)
	}
}
