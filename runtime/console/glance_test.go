package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/console"
)

// glanceNow is the headline test's clock: 12:00 UTC on the 10th, so that
// "last month to date" ends at 12:00 on 10 February, and 21.5 days of
// March are left.
var glanceNow = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// figureText reads a headline figure's text as shown, tags stripped and
// spaces folded, by its id.
func figureText(body, id string) string {
	m := regexp.MustCompile(`(?s)<div class="figure" id="` + id + `"[^>]*>(.*?)</div>`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return strings.Join(strings.Fields(html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], " "))), " ")
}

// TestUsageHeadline: on a fixed clock, the usage page's headline shows
// this month so far against the same days of last month (rows either side
// of the 10th at 12:00 in February count or not), last month whole, the
// month-end projected at the last 7 days' rate, the balance's runway at
// that rate, and requests and tokens against last month to date; a team
// without recent spend sees "no spend" rather than a runway, a new team
// without credit "nothing available", and none sees another's rows. The range's to is a day included, by default
// today.
func TestUsageHeadline(t *testing.T) {
	ctx := context.Background()
	db, dir, l := openDatabase(t)
	clk := clocktesting.NewFakeClock(glanceNow)
	teams := map[string]int64{}
	for name, credit := range map[string]int64{"alpha": 9_000_000, "quiet": 1_000_000, "new": 0} {
		team, _, err := dir.CreateTeam(ctx, name, glanceNow)
		if err != nil {
			t.Fatal(err)
		}
		if credit > 0 {
			if _, err := l.AddCredit(ctx, team.ID, "grant-"+name, credit, "test"); err != nil {
				t.Fatal(err)
			}
		}
		teams[name] = team.ID
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for i, r := range []struct {
		team               string
		at                 string
		cost               int64
		prompt, completion int64
	}{
		{"alpha", "2026-02-05T10:00:00Z", 2_000_000, 100, 50},
		{"alpha", "2026-02-10T11:00:00Z", 1_000_000, 100, 50}, // before 12:00: last month to date
		{"alpha", "2026-02-10T13:00:00Z", 4_000_000, 100, 50}, // after: last month only
		{"alpha", "2026-03-02T09:00:00Z", 1_000_000, 200, 100},
		{"alpha", "2026-03-09T10:00:00Z", 2_000_000, 200, 100}, // in the last 7 days
		{"alpha", "2026-03-10T10:00:00Z", 500_000, 200, 100},   // today
		{"quiet", "2026-02-20T10:00:00Z", 90_000_000, 9_999, 9_999},
	} {
		if _, err := db.ExecContext(ctx, `INSERT INTO usage_ledger (request_id, team_id, model, prompt_tokens, completion_tokens,
			reserved_microcredits, cost_microcredits, status, settled_from, created_at, settled_at)
			VALUES ($1, $2, 'llama-8b', $3, $4, $5, $5, 'settled', 'exact', $6, $6)`,
			fmt.Sprintf("glance-%d", i), teams[r.team], r.prompt, r.completion, r.cost, at(r.at)); err != nil {
			t.Fatal(err)
		}
	}
	srv := serveConsole(t, console.Config{
		Authenticate: func(_ context.Context, authz string) (auth.Principal, error) {
			name := strings.TrimPrefix(authz, "Bearer jwt-")
			id, ok := teams[name]
			if !ok {
				return auth.Principal{}, auth.ErrInvalidCredential
			}
			return auth.Principal{Kind: auth.KindJWT, TeamID: id, TeamName: name, Subject: name + "-user", Role: auth.RoleUser}, nil
		},
		Ledger: l, DB: db, Directory: dir, Clock: clk})
	page := func(t *testing.T, team, path string) (int, string) {
		t.Helper()
		client, csrf := formClient(t, srv)
		if got := postSignIn(t, client, srv, csrf, "jwt-"+team); got != http.StatusSeeOther {
			t.Fatalf("%s sign-in: %d", team, got)
		}
		resp, body := get(t, srv, path, jarSession(t, client, srv))
		return resp.StatusCode, body
	}

	for _, tc := range []struct {
		team string
		want map[string]string
	}{
		{"alpha", map[string]string{
			"g-spend":     "Spend this month 3.50 credits +17 % vs last month to date (3.00)",
			"g-last":      "Last month 7.00 credits all of 2026-02",
			"g-projected": "Projected month-end 11.18 credits this month so far, plus the last 7 days' spend per day (0.357143) for the 21.5 days left",
			"g-balance":   "Available balance 9.00 credits about 25 days at the current rate (to 2026-04-04)",
			"g-requests":  "Requests this month 3 +50 % vs last month to date (2)",
			"g-tokens":    "Tokens this month 900 +200 % vs last month to date (300)",
		}},
		{"quiet", map[string]string{
			"g-spend":     "Spend this month 0.000000 credits none last month to date either",
			"g-last":      "Last month 90.00 credits all of 2026-02",
			"g-projected": "Projected month-end 0.000000 credits this month so far, plus the last 7 days' spend per day (0.000000) for the 21.5 days left",
			"g-balance":   "Available balance 1.00 credits — (no spend in the last 7 days)",
			"g-requests":  "Requests this month 0 none last month to date either",
			"g-tokens":    "Tokens this month 0 none last month to date either",
		}},
		{"new", map[string]string{
			"g-spend":   "Spend this month 0.000000 credits none last month to date either",
			"g-last":    "Last month 0.000000 credits all of 2026-02",
			"g-balance": "Available balance 0.000000 credits — (nothing available)",
		}},
	} {
		t.Run(tc.team+"'s headline", func(t *testing.T) {
			status, body := page(t, tc.team, "/console/usage")
			if status != http.StatusOK {
				t.Fatalf("usage page: %d\n%s", status, body)
			}
			for id, want := range tc.want {
				if got := figureText(body, id); got != want {
					t.Errorf("%s: %q, want %q", id, got, want)
				}
			}
		})
	}

	t.Run("the range's to is a day included", func(t *testing.T) {
		for _, tc := range []struct {
			name, query, from, to string
			requests              int
		}{
			{"by default this month to today", "", "2026-03-01", "2026-03-10", 3},
			{"a range ending on a day of usage", "?from=2026-03-02&to=2026-03-09", "2026-03-02", "2026-03-09", 2},
			{"one day", "?from=2026-03-09&to=2026-03-09", "2026-03-09", "2026-03-09", 1},
		} {
			status, body := page(t, "alpha", "/console/usage"+tc.query)
			if status != http.StatusOK {
				t.Fatalf("%s: %d\n%s", tc.name, status, body)
			}
			fields := regexp.MustCompile(`id="(from|to)" name="(?:from|to)" value="([^"]*)"`).FindAllStringSubmatch(body, -1)
			if len(fields) != 2 || fields[0][2] != tc.from || fields[1][2] != tc.to {
				t.Errorf("%s: date fields %q, want %s and %s", tc.name, fields, tc.from, tc.to)
			}
			got := regexp.MustCompile(`data-model="llama-8b" data-requests="(\d+)"`).FindStringSubmatch(body)
			if got == nil || got[1] != fmt.Sprint(tc.requests) {
				t.Errorf("%s: llama-8b requests %v, want %d", tc.name, got, tc.requests)
			}
		}
		if status, body := page(t, "alpha", "/console/usage?from=2026-03-09&to=2026-03-08"); status != http.StatusBadRequest ||
			!strings.Contains(body, "to must not be before from") {
			t.Errorf("a to before from: %d\n%s", status, body)
		}
	})
}
