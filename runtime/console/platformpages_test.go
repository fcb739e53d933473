package console_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/quota"
)

// pendingCell reads a model's pending count off the platform models page.
var pendingCell = regexp.MustCompile(`(?s)<tr data-model="([^"]*)">.*?<td class="pending">([^<]*)</td>`)

// costCells reads a row's prompt and completion tokens off the cost page.
func costCells(body, model string) string {
	m := regexp.MustCompile(`(?s)<tr data-model="` + regexp.QuoteMeta(model) +
		`"[^>]*>.*?<td class="prompt">([^<]*)</td><td class="completion">([^<]*)</td>`).FindStringSubmatch(body)
	if m == nil {
		return "no row"
	}
	return m[1] + "/" + m[2]
}

// TestPlatformPendingAndCost: the platform models page shows the requests
// waiting in the gateways' shared queue per model, and the cost page the
// week's settled tokens per model from the cost report, leaving out rows
// older than the week.
func TestPlatformPendingAndCost(t *testing.T) {
	tok, err := auth.GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	p := platformtest.Start(t, platformtest.Options{AdminToken: tok})
	p.Model("llama-8b", "llama-8b")
	p.Model("qwen-32b", "qwen-32b")
	team := p.Team("alpha", 50_000_000)
	now := time.Now().UTC()
	for i, r := range []struct {
		model              string
		at                 time.Time
		prompt, completion int64
	}{
		{"llama-8b", now.Add(-2 * 24 * time.Hour), 1200, 300},
		{"llama-8b", now.Add(-time.Hour), 800, 200},
		{"llama-8b", now.Add(-8 * 24 * time.Hour), 99_000, 99_000}, // before the week
	} {
		if _, err := p.DB.ExecContext(context.Background(), `INSERT INTO usage_ledger (request_id, team_id, key_id, model,
			prompt_tokens, completion_tokens, reserved_microcredits, cost_microcredits, status, settled_from, created_at, settled_at)
			VALUES ($1, $2, NULL, $3, $4, $5, 2, 1, 'settled', 'exact', $6, $6)`,
			fmt.Sprintf("cost-%d", i), team, r.model, r.prompt, r.completion, r.at); err != nil {
			t.Fatal(err)
		}
	}
	// Two requests wait for qwen-32b in the shared queue, as gateway
	// replicas' requests that found no capacity do.
	queue, err := quota.NewQueue(p.Redis.Client(), quota.Config{Prefix: p.Redis.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	var waiters sync.WaitGroup
	t.Cleanup(func() { stop(); waiters.Wait() })
	for i := range 2 {
		waiters.Go(func() {
			_ = queue.Wait(ctx, "qwen-32b", fmt.Sprintf("waiting-%d", i), time.Hour,
				func(context.Context) (bool, error) { return false, nil })
		})
	}
	client, csrf := formClient(t, p.URL)
	if got := postSignIn(t, client, p.URL, csrf, tok); got != http.StatusSeeOther {
		t.Fatalf("admin sign-in: %d", got)
	}
	cookie := jarSession(t, client, p.URL)
	eventually(t, func() string {
		resp, body := get(t, p.URL, "/console/platform/models", cookie)
		got := map[string]string{}
		for _, m := range pendingCell.FindAllStringSubmatch(body, -1) {
			got[m[1]] = m[2]
		}
		if resp.StatusCode != http.StatusOK || got["qwen-32b"] != "2" || got["llama-8b"] != "0" {
			return fmt.Sprintf("platform models page: %d, pending %q, want qwen-32b 2 and llama-8b 0", resp.StatusCode, got)
		}
		return ""
	})
	resp, body := get(t, p.URL, "/console/platform/cost", cookie)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cost page: %d\n%s", resp.StatusCode, body)
	}
	if got := costCells(body, "llama-8b"); got != "2,000/500" {
		t.Errorf("cost page llama-8b prompt/completion tokens = %s, want 2,000/500 (the week's rows only)\n%s", got, body)
	}
	if got := costCells(body, "total"); got != "2,000/500" {
		t.Errorf("cost page total = %s, want 2,000/500", got)
	}
	if !strings.Contains(body, "GPU time from node events") || !strings.Contains(body, "node registry") {
		t.Errorf("the cost page does not say where its numbers come from:\n%s", body)
	}
}
