package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// racers is how many creates of one name race in TestCreateOnlyRace.
const racers = 8

// createOnlyAnswer is one racer's answer.
type createOnlyAnswer struct {
	status int
	body   string
	err    error
}

// raceCreates sends racers create-only requests at once, each with its own
// Idempotency-Key (separate terraform runs; round keeps them apart from
// other races'), racer i's body from body(i).
func raceCreates(h *harness, round, method, path string, body func(i int) string) []createOnlyAnswer {
	answers := make([]createOnlyAnswer, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			req, err := http.NewRequest(method, h.url+path, strings.NewReader(body(i)))
			if err != nil {
				answers[i].err = err
				return
			}
			req.Header.Set("Authorization", "Bearer "+h.adminToken)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(adminwire.CreateOnlyHeader, adminwire.CreateOnlyValue)
			req.Header.Set(adminwire.IdempotencyHeader, fmt.Sprintf("%s-racer-%d", round, i))
			<-start
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			answers[i] = createOnlyAnswer{status: resp.StatusCode, body: string(b), err: err}
		})
	}
	close(start)
	wg.Wait()
	return answers
}

// oneWinner checks that exactly one answer is a win (201, or 200 for a
// released team taken back) and every other a 409 already_exists in the
// OpenAI error shape, and returns the winner's index.
func oneWinner(t *testing.T, answers []createOnlyAnswer, win int) int {
	t.Helper()
	winner := -1
	for i, a := range answers {
		if a.err != nil {
			t.Fatalf("racer %d: %v", i, a.err)
		}
		switch a.status {
		case win:
			if winner >= 0 {
				t.Errorf("racers %d and %d both created", winner, i)
			}
			winner = i
		case http.StatusConflict:
			var eb openai.ErrorBody
			if err := json.Unmarshal([]byte(a.body), &eb); err != nil || string(eb.Error.Code) != `"`+adminwire.CodeAlreadyExists+`"` {
				t.Errorf("racer %d: 409 %s, want the OpenAI error shape with code %s", i, a.body, adminwire.CodeAlreadyExists)
			}
		default:
			t.Errorf("racer %d: %d %s, want %d or 409", i, a.status, a.body, win)
		}
	}
	if winner < 0 {
		t.Fatalf("no racer created: %+v", answers)
	}
	return winner
}

// TestCreateOnlyRace: concurrent create-only requests for one team name,
// and for one model name, against real PostgreSQL: exactly one creates,
// every other gets 409 already_exists, and the model holds the winner's
// declaration, not a later racer's.
func TestCreateOnlyRace(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, testenv.Postgres(t), harnessOptions{})
	t.Run("team", func(t *testing.T) {
		answers := raceCreates(h, "create", http.MethodPost, "/admin/teams", func(int) string { return `{"name":"race"}` })
		winner := oneWinner(t, answers, http.StatusCreated)
		var won adminwire.Team
		if err := json.Unmarshal([]byte(answers[winner].body), &won); err != nil {
			t.Fatal(err)
		}
		teams, err := h.client.ListTeams(ctx)
		if err != nil || len(teams) != 1 || teams[0].ID != won.ID {
			t.Errorf("teams after the race = %+v, %v; want only the winner's %d", teams, err, won.ID)
		}
		// Released, the team is taken back by exactly one racer.
		if _, err := h.client.ReleaseTeam(ctx, won.ID); err != nil {
			t.Fatal(err)
		}
		answers = raceCreates(h, "take-back", http.MethodPost, "/admin/teams", func(int) string { return `{"name":"race"}` })
		oneWinner(t, answers, http.StatusOK)
		if got, err := h.client.GetTeam(ctx, won.ID); err != nil || got.ReleasedAt != nil {
			t.Errorf("the team after it was taken back = %+v, %v; want it held", got, err)
		}
	})
	t.Run("model", func(t *testing.T) {
		answers := raceCreates(h, "model", http.MethodPut, "/admin/models/race", func(i int) string {
			return fmt.Sprintf(`{"served_name":"racer-%d","prompt_price_micro_per_mtok":1,"completion_price_micro_per_mtok":1,`+
				`"max_context_tokens":4096,"max_output_tokens":512}`, i)
		})
		winner := oneWinner(t, answers, http.StatusCreated)
		m, err := h.client.GetModel(ctx, "race")
		if want := fmt.Sprintf("racer-%d", winner); err != nil || m.ServedName != want {
			t.Errorf("the model after the race serves %q (%v), want the winner's %q", m.ServedName, err, want)
		}
	})
}

// TestCreateOnly: a create-only request for an existing name is refused
// with 409 whatever made it, and leaves it as it was; a retry of a create
// whose answer was lost (same Idempotency-Key) answers what it created; a
// create-only header with another value than "*" is a 400.
func TestCreateOnly(t *testing.T) {
	ctx := context.Background()
	spec := adminwire.ModelSpec{ServedName: "s", PromptPriceMicroPerMTok: 1, CompletionPriceMicroPerMTok: 1,
		MaxContextTokens: 4096, MaxOutputTokens: 512}
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			api, err := New(Config{DB: h.db, Ledger: h.ledger, Authenticate: h.authenticate, Clock: h.clock, Logger: debugLogger(h.logs)})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(&lossyProxy{next: api.Handler(), seen: map[string]bool{}})
			defer srv.Close()
			lossy, err := adminclient.NewClient(srv.URL, h.adminToken, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			lossy.Retry = adminclient.RetryPolicy{MaxAttempts: adminclient.DefaultMaxAttempts}

			team, created, err := lossy.CreateTeamOnly(ctx, "search", "")
			if err != nil || created || team.Name != "search" {
				t.Fatalf("CreateTeamOnly through a lost answer = %+v, created %v, %v; want the team it made", team, created, err)
			}
			if _, _, err := lossy.CreateModel(ctx, "llama", spec, ""); err != nil {
				t.Fatalf("CreateModel through a lost answer: %v", err)
			}
			if _, _, err := h.client.CreateTeamOnly(ctx, "search", ""); !adminclient.IsAlreadyExists(err) {
				t.Errorf("CreateTeamOnly of an existing team: %v, want 409 %s", err, adminwire.CodeAlreadyExists)
			}
			hand, _, err := h.client.CreateTeam(ctx, "by-hand")
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := h.client.CreateTeamOnly(ctx, "by-hand", ""); !adminclient.IsAlreadyExists(err) {
				t.Errorf("CreateTeamOnly of a team made by hand: %v, want 409 %s", err, adminwire.CodeAlreadyExists)
			}
			other := spec
			other.ServedName = "other"
			if _, _, err := h.client.CreateModel(ctx, "llama", other, ""); !adminclient.IsAlreadyExists(err) {
				t.Errorf("CreateModel of an existing model: %v, want 409 %s", err, adminwire.CodeAlreadyExists)
			}
			if m, err := h.client.GetModel(ctx, "llama"); err != nil || m.ModelSpec != spec {
				t.Errorf("the model after a refused create = %+v, %v; want %+v", m.ModelSpec, err, spec)
			}
			teams, err := h.client.ListTeams(ctx)
			if err != nil || len(teams) != 2 || teams[1].ID != hand.ID {
				t.Errorf("teams = %+v, %v; want search and by-hand", teams, err)
			}
			// A released team is taken back, once, with its id; a team made
			// by hand is never released, so never taken.
			released, err := h.client.ReleaseTeam(ctx, team.ID)
			if err != nil || released.ReleasedAt == nil || !released.ReleasedAt.Equal(testStart) {
				t.Fatalf("ReleaseTeam = %+v, %v; want released_at %v", released, err, testStart)
			}
			back, created, err := h.client.CreateTeamOnly(ctx, "search", "")
			if err != nil || created || back.ID != team.ID || back.ReleasedAt != nil {
				t.Errorf("CreateTeamOnly of a released team = %+v, created %v, %v; want team %d held again", back, created, err, team.ID)
			}
			if _, _, err := h.client.CreateTeamOnly(ctx, "search", ""); !adminclient.IsAlreadyExists(err) {
				t.Errorf("CreateTeamOnly of a team taken back: %v, want 409 %s", err, adminwire.CodeAlreadyExists)
			}
			_, err = h.client.ReleaseTeam(ctx, 999)
			wantAPIError(t, "release a missing team", err, http.StatusNotFound, "id")
			status, body, _ := h.raw(t, http.MethodPost, "/admin/teams", `{"name":"etag"}`,
				http.Header{adminwire.CreateOnlyHeader: {`"abc"`}})
			if status != http.StatusBadRequest || !strings.Contains(body, adminwire.CreateOnlyHeader) {
				t.Errorf("If-None-Match other than *: %d %s, want 400 naming the header", status, body)
			}
		})
	}
}
