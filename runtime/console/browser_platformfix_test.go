package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// strictPolicy is the CSP every console answer carries, HTML or not.
const strictPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// adminGet reads path of the admin API with the admin token into out.
func adminGet(t *testing.T, base, tok, path string, out any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := (&http.Client{Timeout: httpTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
}

// adminPost posts to path of the admin API with the admin token.
func adminPost(t *testing.T, base, tok, path string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := (&http.Client{Timeout: httpTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("POST %s: %d", path, resp.StatusCode)
	}
}

// TestPlatformPagesInBrowser: on a platform with two teams holding open
// reservations and four llama-8b nodes (serving, unhealthy, drained, and
// one registered that never beat), the platform pages show what the admin
// API says: each team's available, reserved and balance as GET
// /admin/teams; each model's replicas serving, the nodes counted apart,
// engine queue and KV-cache use as GET /admin/nodes; a drained node's time
// said for what it is; the GPU-hours page saying why it counts none. A
// team's session at a platform page gets a page titled for what happened;
// a chart opened on its own draws in its colours under the strict CSP.
func TestPlatformPagesInBrowser(t *testing.T) {
	tok, err := auth.GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	p := platformtest.Start(t, platformtest.Options{AdminToken: tok})
	p.Model("llama-8b", "llama-8b")
	p.Model("qwen-32b", "qwen-32b")
	alpha, beta := p.Team("alpha", 50_000_000), p.Team("beta", 3_000_000)
	keyA := p.Key(adminwire.CreateKeyRequest{TeamID: alpha, Name: "ci"})
	ctx := context.Background()
	// Open reservations make available differ from the balance, by a
	// different amount per team.
	for i, r := range []struct {
		team   int64
		prompt int64
	}{{alpha, 4000}, {alpha, 1000}, {beta, 2500}} {
		if _, err := p.Ledger.Reserve(ctx, ledger.Reservation{RequestID: fmt.Sprintf("open-%d", i), TeamID: r.team,
			Model: "llama-8b", PromptTokens: r.prompt, MaxOutputTokens: 200}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.DB.ExecContext(ctx, `INSERT INTO usage_ledger (request_id, team_id, key_id, model,
		prompt_tokens, completion_tokens, reserved_microcredits, cost_microcredits, status, settled_from, created_at, settled_at)
		VALUES ('usage-today', $1, NULL, 'llama-8b', 1000, 100, 2, 1, 'settled', 'exact', $2, $2)`, alpha, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	sim := enginesim.Config{ServedModelName: "llama-8b", Seed: 1, TimeScale: 1}
	p.StartNode("node-serving", "llama-8b", sim, 8)
	p.StartNode("node-drained", "llama-8b", sim, 8)
	sick := platformtest.StartEngine(t, enginesim.Config{ServedModelName: "llama-8b", Seed: 2, TimeScale: 1, MaxNumSeqs: 8})
	p.StartAgent(p.WSURL, "node-sick", "llama-8b", sick.Sim, sick.URL)
	p.WaitNode("node-sick")
	sick.Stop()
	if _, err := p.DB.ExecContext(ctx, `INSERT INTO nodes (id, location, gpus, gpu_model, models, state)
		VALUES ('node-silent', 'onprem', 0, '', '[{"name":"llama-8b"}]', 'active')`); err != nil {
		t.Fatal(err)
	}
	adminPost(t, p.URL, tok, "/admin/nodes/node-drained/drain")
	var nodes adminwire.NodeList
	eventually(t, func() string {
		adminGet(t, p.URL, tok, "/admin/nodes", &nodes)
		state := map[string]string{}
		for _, n := range nodes.Data {
			switch {
			case n.Live == nil:
				state[n.ID] = "silent " + n.State
			case n.Live.Healthy:
				state[n.ID] = "healthy"
			default:
				state[n.ID] = "unhealthy"
			}
		}
		want := map[string]string{"node-serving": "healthy", "node-sick": "unhealthy", "node-drained": "silent drained", "node-silent": "silent active"}
		if fmt.Sprint(state) != fmt.Sprint(want) {
			return fmt.Sprintf("GET /admin/nodes says %v, want %v", state, want)
		}
		return ""
	})

	browser := newBrowser(t)
	admin := newTab(t, browser)
	signIn(t, admin, p.URL, tok)

	t.Run("the teams page shows each team's money as GET /admin/teams", func(t *testing.T) {
		type money struct{ Available, Reserved, Balance int64 }
		var api adminwire.List[adminwire.Team]
		adminGet(t, p.URL, tok, "/admin/teams", &api)
		do(t, admin, chromedp.Navigate(p.URL+"/console/platform/teams"), chromedp.WaitVisible(chromedp.ID("teams")))
		shown := run(t, admin, chromedp.Evaluate[map[string]money](`Object.fromEntries(Array.from(document.querySelectorAll('#teams tbody tr')).map(tr =>
			[tr.dataset.team, {Available: +tr.dataset.available, Reserved: +tr.dataset.reserved, Balance: +tr.dataset.balance}]))`))
		text := run(t, admin, chromedp.Evaluate[map[string]string](`Object.fromEntries(Array.from(document.querySelectorAll('#teams tbody tr')).map(tr =>
			[tr.dataset.team, tr.querySelector('.available').textContent]))`))
		checked := 0
		for _, team := range api.Data {
			if team.ID != alpha && team.ID != beta {
				continue
			}
			checked++
			want := money{team.AvailableMicrocredits, team.ReservedMicrocredits, team.BalanceMicrocredits}
			id := fmt.Sprint(team.ID)
			if got := shown[id]; got != want {
				t.Errorf("team %s: the page shows %+v, GET /admin/teams %+v", team.Name, got, want)
			}
			if want.Reserved == 0 || want.Available == want.Balance {
				t.Errorf("team %s holds no open reservation: %+v", team.Name, want)
			}
			if wantText := fmt.Sprintf("%d.%06d", want.Available/1_000_000, want.Available%1_000_000); text[id] != wantText {
				t.Errorf("team %s: the Available cell reads %q, want %q", team.Name, text[id], wantText)
			}
		}
		if checked != 2 {
			t.Errorf("GET /admin/teams lists %d of the two teams", checked)
		}
	})

	t.Run("the platform models page shows each model's capacity as GET /admin/nodes", func(t *testing.T) {
		type capRow struct {
			Serving, Draining, Unhealthy, Silent, Queue, Running int
			KVMax                                                float64
		}
		var api adminwire.NodeList
		adminGet(t, p.URL, tok, "/admin/nodes", &api)
		do(t, admin, chromedp.Navigate(p.URL+"/console/platform/models"), chromedp.WaitVisible(chromedp.ID("capacity")))
		shown := run(t, admin, chromedp.Evaluate[map[string]capRow](`Object.fromEntries(Array.from(document.querySelectorAll('#capacity tbody tr')).map(tr =>
			[tr.dataset.model, {Serving: +tr.dataset.serving, Draining: +tr.dataset.draining, Unhealthy: +tr.dataset.unhealthy,
			 Silent: +tr.dataset.silent, Queue: +tr.dataset.queue, Running: +tr.dataset.running, KVMax: +tr.dataset.kvMax}]))`))
		want := map[string]capRow{"llama-8b": {}, "qwen-32b": {}}
		for _, n := range api.Data {
			var slots []struct{ Name string }
			if err := json.Unmarshal(n.Models, &slots); err != nil {
				t.Fatal(err)
			}
			for _, s := range slots {
				r := want[s.Name]
				switch l := n.Live; {
				case l == nil:
					r.Silent++
				case l.Draining:
					r.Draining++
				case !l.Healthy:
					r.Unhealthy++
				default:
					r.Serving++
					r.KVMax = max(r.KVMax, l.KVCacheUsage)
				}
				if n.Live != nil {
					r.Queue += n.Live.QueueDepth
					r.Running += n.Live.Running
				}
				want[s.Name] = r
			}
		}
		if fmt.Sprint(shown) != fmt.Sprint(want) {
			t.Errorf("the capacity table shows %+v, GET /admin/nodes %+v", shown, want)
		}
		if l := want["llama-8b"]; l.Serving != 1 || l.Unhealthy != 1 || l.Silent != 2 {
			t.Errorf("GET /admin/nodes does not show the fixture's nodes: %+v", l)
		}
		screenshot(t, admin, "console-capacity.png")
	})

	t.Run("a drained node's time is said for what it is", func(t *testing.T) {
		var api adminwire.NodeList
		adminGet(t, p.URL, tok, "/admin/nodes", &api)
		i := slices.IndexFunc(api.Data, func(n adminwire.Node) bool { return n.ID == "node-drained" })
		if i < 0 || api.Data[i].LastSeen == nil {
			t.Fatalf("GET /admin/nodes has no last_seen for node-drained: %+v", api.Data)
		}
		do(t, admin, chromedp.Navigate(p.URL+"/console/platform/nodes"), chromedp.WaitVisible(chromedp.ID("nodes")))
		cell := run(t, admin, chromedp.Evaluate[string](`document.querySelector('#nodes tr[data-node="node-drained"] td:nth-child(9)').textContent`))
		seen := api.Data[i].LastSeen.UTC().Format("2006-01-02 15:04:05 UTC")
		if strings.Contains(cell, "registration") || !strings.Contains(cell, "drained, disconnected "+seen) {
			t.Errorf("node-drained's last heartbeat reads %q, want it to say it disconnected, drained, at %s", cell, seen)
		}
	})

	t.Run("the GPU-hours page says why it counts none", func(t *testing.T) {
		do(t, admin, chromedp.Navigate(p.URL+"/console/platform/cost"), chromedp.WaitVisible(chromedp.ID("computed")))
		why := run(t, admin, chromedp.Evaluate[string](`document.getElementById('no-gpu-hours')?.textContent ?? ''`))
		for _, want := range []string{"No GPU-hours in this window", "node-serving", "node-drained", "node-sick", "registered no GPU"} {
			if !strings.Contains(why, want) {
				t.Errorf("the GPU-hours page's empty state %q lacks %q", why, want)
			}
		}
	})

	t.Run("a team's session at a platform page is told it is the platform team's", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, p.URL, keyA)
		resp, _ := get(t, p.URL, "/console/platform/teams", sessionCookie(t, tab, p.URL))
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a team's session at /console/platform/teams: %d, want 403", resp.StatusCode)
		}
		do(t, tab, chromedp.Navigate(p.URL+"/console/platform/teams"), chromedp.WaitVisible(chromedp.ID("problem")))
		title := run(t, tab, chromedp.Title())
		heading := run(t, tab, chromedp.Text(chromedp.CSS("h1")))
		msg := run(t, tab, chromedp.Text(chromedp.ID("problem")))
		if !strings.HasPrefix(title, "Platform team only") || heading != "Platform team only" || !strings.Contains(msg, "admin") {
			t.Errorf("a team's session at a platform page: title %q, heading %q, message %q", title, heading, msg)
		}
		if html := run(t, tab, chromedp.OuterHTML(chromedp.CSS("main"))); strings.Contains(html, "alpha") && strings.Contains(html, "beta") {
			t.Error("the refused page lists the teams")
		}
	})

	t.Run("a chart opened on its own draws in its colours under the strict CSP", func(t *testing.T) {
		tab := newTab(t, browser)
		signIn(t, tab, p.URL, keyA)
		day := time.Now().UTC()
		chart := fmt.Sprintf("/console/usage.svg?metric=tokens&from=%s&to=%s", day.Add(-2*24*time.Hour).Format(time.DateOnly), day.Add(24*time.Hour).Format(time.DateOnly))
		do(t, tab, chromedp.Navigate(p.URL+chart), chromedp.WaitReady("svg"))
		colours := run(t, tab, chromedp.Evaluate[[]string](`(() => { const bg = document.querySelector('svg rect');
			const bar = document.querySelector('svg rect[data-model]');
			return [getComputedStyle(bg).fill, bar ? getComputedStyle(bar).fill : 'none', bar ? bar.getAttribute('fill') : ''] })()`))
		var r, g, bl int
		if _, err := fmt.Sscanf(colours[2], "#%02x%02x%02x", &r, &g, &bl); err != nil {
			t.Fatalf("the standalone chart has no bar with a colour: %v (%q)", err, colours)
		}
		if want := fmt.Sprintf("rgb(%d, %d, %d)", r, g, bl); colours[0] != "rgb(255, 255, 255)" || colours[1] != want {
			t.Errorf("the standalone chart draws its background %s and its bar %s, want white and %s: its colours were blocked", colours[0], colours[1], want)
		}
		shot := run(t, tab, chromedp.CaptureScreenshot())
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatal(err)
		}
		// The chart's corner is its background, white unless blocked.
		if r, g, bl, _ := img.At(img.Bounds().Min.X+2, img.Bounds().Min.Y+2).RGBA(); r>>8 < 0xf0 || g>>8 < 0xf0 || bl>>8 < 0xf0 {
			t.Errorf("the standalone chart's corner pixel is #%02x%02x%02x, want its white background", r>>8, g>>8, bl>>8)
		}
		cookie := sessionCookie(t, tab, p.URL)
		for _, path := range []string{chart, "/console/usage", "/console/keys"} {
			if resp, _ := get(t, p.URL, path, cookie); resp.Header.Get("Content-Security-Policy") != strictPolicy {
				t.Errorf("%s: CSP %q, want the strict %q", path, resp.Header.Get("Content-Security-Policy"), strictPolicy)
			}
		}
	})
}
