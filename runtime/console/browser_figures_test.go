package console_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/coldstart"
	"github.com/llmplat/llmplat/runtime/costreport"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// maxLimitedAttempts bounds the requests sent on a one-per-minute key to
// see it refused twice: two in the same minute suffice, and a minute
// boundary between them costs one more.
const maxLimitedAttempts = 6

// node1GPU is node-1's GPU as nvidia-smi names it: a kind the reference
// workload prices, so that its GPU-hours count on the cost page.
var node1GPU = nodeproto.GPU{Index: 0, Name: "NVIDIA L40S", MemoryBytes: 48 << 30}

// startNode1 runs node-1, a simulated engine serving llama-8b behind an
// agent that reports node1GPU, once for the whole test; it returns when
// the orchestrator has the node and the model is no longer at zero.
func (f *fixture) startNode1() {
	t := f.t
	t.Helper()
	if f.node1 {
		return
	}
	sim, engineURL := platformtest.ServeSim(t, enginesim.Config{ServedModelName: "llama-8b", Seed: 1, TimeScale: 1, MaxNumSeqs: 8})
	agent, err := nodeagent.New(nodeagent.Config{ServerURL: f.p.WSURL, NodeID: "node-1", Token: nodeproto.Secret(f.p.NodeToken("node-1")),
		EngineURL: engineURL, GPUs: []nodeproto.GPU{node1GPU},
		Models: []nodeproto.Model{{Name: "llama-8b", ServedName: sim.ServedModelName(), MaxNumSeqs: sim.MaxNumSeqs(),
			MaxModelLen: int(sim.MaxModelLen()), KVCapacityTokens: sim.Stats().KVBlocksTotal * 16}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1) // the agent's result, read at cleanup
	go func() { done <- agent.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent node-1: %v", err)
		}
	})
	f.p.WaitNode("node-1")
	board, err := coldstart.New(f.p.Redis.Client(), f.p.Redis.Prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, waitTimeout, "llama-8b no longer at zero after node-1 registered", func() bool {
		zero, err := board.AtZero(context.Background(), "llama-8b")
		return err == nil && !zero
	})
	f.node1 = true
}

// complete sends one chat completion with key through the gateway and
// returns its status.
func (f *fixture) complete(t *testing.T, key string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.p.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"llama-8b","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
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
	return resp.StatusCode
}

// checkKeyRefusals drives real 429s through the gateway on a key limited
// to one request a minute and reads the keys page's "429s, last hour"
// column in the browser: the count the API answered for that key, none
// for the team's other key.
func checkKeyRefusals(t *testing.T, f *fixture, browser context.Context, base string) {
	f.startNode1()
	limited := f.p.Key(adminwire.CreateKeyRequest{TeamID: f.teamA, Name: "nightly-batch", RPM: 1})
	const wantRefused = 2
	refused, statuses := 0, []int{}
	for range maxLimitedAttempts {
		status := f.complete(t, limited)
		statuses = append(statuses, status)
		if status == http.StatusTooManyRequests {
			refused++
		} else if status != http.StatusOK {
			t.Fatalf("a request on the limited key answered %d (all: %v)", status, statuses)
		}
		if refused == wantRefused {
			break
		}
	}
	if refused != wantRefused {
		t.Fatalf("a one-per-minute key answered %v, want %d refusals", statuses, wantRefused)
	}
	tab := newTab(t, browser)
	signIn(t, tab, base, f.keyA)
	do(t, tab, chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.ID("keys")))
	got := run(t, tab, chromedp.Evaluate[map[string]string](`Object.fromEntries(Array.from(document.querySelectorAll('#keys tbody tr')).map(
		tr => [tr.querySelector('.key-name').textContent, tr.querySelector('.key-refused').textContent]))`))
	want := map[string]string{"ci-pipeline": "0", "nightly-batch": fmt.Sprintf("%d (was limited)", refused)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("429s in the last hour per key on the page %q, want %q (the API answered %v)", got, want, statuses)
	}
	screenshot(t, tab, "console-keys.png")
}

// costRow is a row of the GPU-hours page as its data attributes give it.
type costRow struct {
	Model                        string
	GPUHours                     float64
	Requests, Prompt, Completion int64
}

// costPage is the GPU-hours page's window and rows.
type costPage struct {
	From, To string
	Rows     []costRow
}

// gpuHoursTolerance absorbs float summation order between two
// computations of the same GPU time.
const gpuHoursTolerance = 1e-9

// checkCostPage drives a completion through node-1, then reads the
// GPU-hours page in the browser and compares it, for the window the page
// states, with the ledger's settled rows (requests and tokens per model)
// and with the cost report `llmplat report` computes (GPU-hours).
func checkCostPage(t *testing.T, f *fixture, browser context.Context, base string) {
	f.startNode1()
	if got := f.complete(t, f.keyA); got != http.StatusOK {
		t.Fatalf("completion: %d", got)
	}
	ctx := context.Background()
	eventually(t, func() string {
		var open int
		if err := f.p.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM usage_ledger WHERE status = 'reserved'`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open > 0 {
			return fmt.Sprintf("%d requests are still open in the ledger", open)
		}
		return ""
	})
	tab := newTab(t, browser)
	signIn(t, tab, base, f.adminToken)
	do(t, tab, chromedp.Navigate(base+"/console/platform/cost"), chromedp.WaitVisible(chromedp.ID("cost")))
	page := run(t, tab, chromedp.Evaluate[costPage](`(() => { const t = document.getElementById('cost');
		return {From: t.dataset.from, To: t.dataset.to, Rows: Array.from(t.querySelectorAll('tr[data-model]')).map(tr => ({
			Model: tr.dataset.model, GPUHours: +tr.dataset.gpuHours, Requests: +tr.dataset.requests,
			Prompt: +tr.dataset.prompt, Completion: +tr.dataset.completion})) } })()`))
	from, err1 := time.Parse(time.RFC3339Nano, page.From)
	to, err2 := time.Parse(time.RFC3339Nano, page.To)
	if err1 != nil || err2 != nil || to.Sub(from) != 7*24*time.Hour {
		t.Fatalf("the page's window %q to %q (%v, %v), want a week", page.From, page.To, err1, err2)
	}
	shown := map[string]costRow{}
	for _, r := range page.Rows {
		shown[r.Model] = r
	}

	// Requests and tokens: the ledger's settled rows created in the window.
	rows, err := f.p.DB.QueryContext(ctx, `SELECT model, COUNT(*), CAST(SUM(prompt_tokens) AS BIGINT), CAST(SUM(completion_tokens) AS BIGINT)
		FROM usage_ledger WHERE status = 'settled' AND created_at >= $1 AND created_at < $2 GROUP BY model`, from, to)
	if err != nil {
		t.Fatal(err)
	}
	ledger := map[string]costRow{}
	var total costRow
	for rows.Next() {
		var r costRow
		if err := rows.Scan(&r.Model, &r.Requests, &r.Prompt, &r.Completion); err != nil {
			t.Fatal(err)
		}
		ledger[r.Model] = r
		total.Requests, total.Prompt, total.Completion = total.Requests+r.Requests, total.Prompt+r.Prompt, total.Completion+r.Completion
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	ledger["total"] = costRow{Model: "total", Requests: total.Requests, Prompt: total.Prompt, Completion: total.Completion}
	if ledger["llama-8b"].Requests < 5 || ledger["qwen-32b"].Requests != 1 {
		t.Fatalf("the ledger's week %v lacks the fixture's rows and the completion", ledger)
	}
	for model, want := range ledger {
		got := shown[model]
		got.GPUHours = 0
		if got != want {
			t.Errorf("the page's %s row %+v, the ledger's settled rows %+v", model, got, want)
		}
	}

	// GPU-hours: the cost report for the same window, priced as the page
	// prices it without a config (the reference workload's profiles).
	rep, err := costreport.Generate(ctx, f.p.DB, costreport.Options{Window: costreport.Window{From: from, To: to},
		GPU: costreport.NodeEvents{DB: f.p.DB, Profiles: costreport.NewProfiles(capacity.ReferenceInput())}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"total": rep.Total.GPUHours}
	for _, m := range rep.Models {
		want[m.Model] = m.GPUHours
	}
	if len(want) != len(shown) {
		t.Errorf("the page has rows %v, the cost report %v", shown, want)
	}
	for model, w := range want {
		if got := shown[model].GPUHours; math.Abs(got-w) > gpuHoursTolerance {
			t.Errorf("the page's %s GPU-hours %v, the cost report's %v", model, got, w)
		}
	}
	if shown["llama-8b"].GPUHours <= 0 {
		t.Errorf("llama-8b shows %v GPU-hours while node-1 has been serving it", shown["llama-8b"].GPUHours)
	}
	screenshot(t, tab, "console-cost.png")
}
