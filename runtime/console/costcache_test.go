package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/console"
	"github.com/llmplat/llmplat/runtime/store"
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
	clk := clocktesting.NewFakeClock(time.Now().UTC().Truncate(time.Second))
	c := adminConsole(t, clk)
	db, srv, cookie := c.db, c.srv, c.cookie
	team, _, err := c.dir.CreateTeam(ctx, "alpha", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
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

// TestCostPageUnpricedGPU: a node of a GPU kind the console has no price
// for (an on-premises card nobody priced) does not break the cost page:
// its hours count, the cost leaves them out, and the page says so.
func TestCostPageUnpricedGPU(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now().UTC().Truncate(time.Second))
	c := adminConsole(t, clk)
	if _, err := c.db.ExecContext(ctx, `INSERT INTO nodes (id, location, gpus, gpu_model, models)
		VALUES ('odd', 'onprem', 1, 'MI300X', '["llama-8b"]')`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.db.ExecContext(ctx, `INSERT INTO node_events (node_id, kind, created_at) VALUES ('odd', 'register', $1)`,
		clk.Now().Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, c.srv, "/console/platform/cost", c.cookie)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="unpriced"`) || !strings.Contains(body, "2.000 GPU-hours ran on GPU kinds without a price") {
		t.Fatalf("cost page with an unpriced GPU: %d, want 200 saying 2.000 GPU-hours are unpriced\n%s", resp.StatusCode, body)
	}
}

// adminTestConsole is a console on its own database with an admin
// signed in.
type adminTestConsole struct {
	db     *store.DB
	dir    *admin.SQLStore
	srv    string // the console's base URL
	cookie *http.Cookie
}

// adminConsole serves a console on its own database, on clk, and signs an
// admin in.
func adminConsole(t *testing.T, clk *clocktesting.FakeClock) adminTestConsole {
	t.Helper()
	db, dir, l := openDatabase(t)
	const token = "llpadm_cost-test"
	srv := serveConsole(t, console.Config{
		Authenticate: func(_ context.Context, authz string) (auth.Principal, error) {
			if authz != "Bearer "+token {
				return auth.Principal{}, auth.ErrInvalidCredential
			}
			return auth.Principal{Kind: auth.KindAdminToken, Subject: "admin", Role: auth.RoleAdmin}, nil
		},
		Ledger: l, DB: db, Directory: dir, Clock: clk})
	client, csrf := formClient(t, srv)
	if got := postSignIn(t, client, srv, csrf, token); got != http.StatusSeeOther {
		t.Fatalf("admin sign-in: %d", got)
	}
	return adminTestConsole{db: db, dir: dir, srv: srv, cookie: jarSession(t, client, srv)}
}

// TestCostPageNodesWithoutGPUs: nodes that registered no GPU, as the local
// mode's simulated engines do, count no GPU-hours; the cost page says so
// and names them, rather than show zeros without a word, whether the week
// has other GPU time or none (the page's empty case). A drained node that
// was up in the week is named too; one registered with GPUs is not.
func TestCostPageNodesWithoutGPUs(t *testing.T) {
	type node struct {
		id     string
		gpus   int
		events []string
	}
	local := []node{{"local-llama-8b", 0, []string{"register"}}, {"local-qwen-32b", 0, []string{"register", "drain"}}}
	for _, tc := range []struct {
		name  string
		nodes []node
	}{
		{"alone", local},
		{"beside a node with a GPU", append([]node{{"gpu-node", 1, []string{"register"}}}, local...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clocktesting.NewFakeClock(time.Now().UTC().Truncate(time.Second))
			c := adminConsole(t, clk)
			for _, n := range tc.nodes {
				if _, err := c.db.ExecContext(ctx, `INSERT INTO nodes (id, location, gpus, gpu_model, models)
					VALUES ($1, 'onprem', $2, 'L40S', '[{"name":"llama-8b"}]')`, n.id, n.gpus); err != nil {
					t.Fatal(err)
				}
				for i, kind := range n.events {
					if _, err := c.db.ExecContext(ctx, `INSERT INTO node_events (node_id, kind, created_at) VALUES ($1, $2, $3)`,
						n.id, kind, clk.Now().Add(time.Duration(i-3)*time.Hour)); err != nil {
						t.Fatal(err)
					}
				}
			}
			resp, body := get(t, c.srv, "/console/platform/cost", c.cookie)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("cost page: %d\n%s", resp.StatusCode, body)
			}
			note := regexp.MustCompile(`(?s)<p class="note" id="no-gpus">(.*?)</p>`).FindStringSubmatch(body)
			if note == nil {
				t.Fatalf("the cost page does not say why nodes count no GPU-hours:\n%s", body)
			}
			for _, want := range []string{"2 nodes", "local-llama-8b", "local-qwen-32b", "registered no GPU", "no GPU-hours and no GPU cost"} {
				if !strings.Contains(note[1], want) {
					t.Errorf("the note %q lacks %q", note[1], want)
				}
			}
			if strings.Contains(note[1], "gpu-node") {
				t.Errorf("the note %q names a node with a GPU", note[1])
			}
			why := regexp.MustCompile(`(?s)<p class="empty" id="no-gpu-hours">(.*?)</p>`).FindStringSubmatch(body)
			switch {
			case tc.name == "alone" && (why == nil || !strings.Contains(why[1], "No GPU-hours") || !strings.Contains(why[1], "local-qwen-32b")):
				t.Errorf("with only nodes without a GPU the page does not say why it counts no GPU-hours:\n%s", body)
			case tc.name != "alone" && why != nil:
				t.Errorf("beside GPU time the page says %q", why[1])
			}
		})
	}
}
