package console_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// refusedCell reads a key row's name and its 429 count off the keys page.
var refusedCell = regexp.MustCompile(`(?s)<td class="key-name">([^<]*)</td>.*?<td class="key-refused[^"]*">([^<]*)</td>`)

// TestKeysShowRecentRefusals: a key its requests-per-minute limit refuses
// shows its 429s of the last hour on the keys page, counted where the
// gateway refused; a key never refused shows none.
func TestKeysShowRecentRefusals(t *testing.T) {
	p := platformtest.Start(t, platformtest.Options{})
	p.Model("llama-8b", "llama-8b")
	team := p.Team("alpha", 50_000_000)
	limited := p.Key(adminwire.CreateKeyRequest{TeamID: team, Name: "limited", RPM: 1})
	quiet := p.Key(adminwire.CreateKeyRequest{TeamID: team, Name: "quiet"})
	p.StartNode("node-1", "llama-8b", enginesim.Config{ServedModelName: "llama-8b", Seed: 1, TimeScale: 1}, 8)
	var statuses []int
	for range 3 {
		req, err := http.NewRequest(http.MethodPost, p.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"llama-8b","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+limited)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: httpTimeout}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		platformtest.Discard(resp)
		statuses = append(statuses, resp.StatusCode)
	}
	if statuses[0] != http.StatusOK || statuses[1] != http.StatusTooManyRequests || statuses[2] != http.StatusTooManyRequests {
		t.Fatalf("three requests in a minute on a 1-per-minute key answered %v, want 200 429 429", statuses)
	}
	client, csrf := formClient(t, p.URL)
	if got := postSignIn(t, client, p.URL, csrf, quiet); got != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", got)
	}
	resp, body := get(t, p.URL, "/console/keys", jarSession(t, client, p.URL))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("keys page: %d\n%s", resp.StatusCode, body)
	}
	got := map[string]string{}
	for _, m := range refusedCell.FindAllStringSubmatch(body, -1) {
		got[m[1]] = m[2]
	}
	if got["limited"] != "2 (was limited)" || got["quiet"] != "0" {
		t.Errorf("429s in the last hour per key = %q, want limited: 2 (was limited), quiet: 0\n%s", got, body)
	}
	if !strings.Contains(body, "refusal counters in Redis") {
		t.Errorf("the keys page does not say where the 429 counts come from:\n%s", body)
	}
}
