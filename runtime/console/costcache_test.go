package console_test

import (
	"context"
	"net/http"
	"regexp"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/console"
)

// computedAt reads when the cost page's figures were read, as its source
// line says.
var computedAt = regexp.MustCompile(`Read at ([^<]*)\.</p>`)

// costTestTTL is the cost page's cache life as the page states it; the
// test steps its clock to just inside and just past it.
const costTestTTL = time.Minute

// TestCostPageCache: two views of the cost page within the cache's life
// show one computation (the same computed-at time and figures, though a
// row settled between them); the first view after it computes again and
// shows the new row.
func TestCostPageCache(t *testing.T) {
	ctx := context.Background()
	db, dir, l := openDatabase(t)
	clk := clocktesting.NewFakeClock(time.Now().UTC().Truncate(time.Second))
	team, _, err := dir.CreateTeam(ctx, "alpha", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	const token = "llpadm_cost-cache-test"
	srv := serveConsole(t, console.Config{
		Authenticate: func(_ context.Context, authz string) (auth.Principal, error) {
			if authz != "Bearer "+token {
				return auth.Principal{}, auth.ErrInvalidCredential
			}
			return auth.Principal{Kind: auth.KindAdminToken, Subject: "admin", Role: auth.RoleAdmin}, nil
		},
		Ledger: l, DB: db, Directory: dir, Now: clk.Now})
	client, csrf := formClient(t, srv)
	if got := postSignIn(t, client, srv, csrf, token); got != http.StatusSeeOther {
		t.Fatalf("admin sign-in: %d", got)
	}
	cookie := jarSession(t, client, srv)
	settle := func(id string, prompt, completion int64) {
		t.Helper()
		if _, err := db.ExecContext(ctx, `INSERT INTO usage_ledger (request_id, team_id, model, prompt_tokens, completion_tokens,
			reserved_microcredits, cost_microcredits, status, settled_from, created_at, settled_at)
			VALUES ($1, $2, 'llama-8b', $3, $4, 2, 1, 'settled', 'exact', $5, $5)`, id, team.ID, prompt, completion, clk.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	view := func() (computed, tokens string) {
		t.Helper()
		resp, body := get(t, srv, "/console/platform/cost", cookie)
		m := computedAt.FindStringSubmatch(body)
		if resp.StatusCode != http.StatusOK || m == nil {
			t.Fatalf("cost page: %d\n%s", resp.StatusCode, body)
		}
		return m[1], costCells(body, "total")
	}

	settle("first", 1000, 100)
	at1, tokens1 := view()
	if tokens1 != "1,000/100" {
		t.Fatalf("first view's total tokens %s, want 1,000/100", tokens1)
	}
	settle("second", 2000, 200)
	clk.Step(costTestTTL - time.Second)
	at2, tokens2 := view()
	if at2 != at1 || tokens2 != tokens1 {
		t.Errorf("a view %v later shows %s computed at %s, want the first view's %s computed at %s (one computation)",
			costTestTTL-time.Second, tokens2, at2, tokens1, at1)
	}
	clk.Step(2 * time.Second)
	at3, tokens3 := view()
	if at3 == at1 || tokens3 != "3,000/300" {
		t.Errorf("a view past the cache's life shows %s computed at %s, want 3,000/300 computed anew (first at %s)", tokens3, at3, at1)
	}
}
