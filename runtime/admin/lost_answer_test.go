package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// lossyProxy forwards to next but, for the first call of each method and
// path, throws the answer away and answers 502: the create happened, the
// caller never heard.
type lossyProxy struct {
	next http.Handler
	mu   sync.Mutex
	seen map[string]bool
}

func (p *lossyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k := r.Method + " " + r.URL.Path
	p.mu.Lock()
	first := !p.seen[k]
	p.seen[k] = true
	p.mu.Unlock()
	if !first {
		p.next.ServeHTTP(w, r)
		return
	}
	p.next.ServeHTTP(httptest.NewRecorder(), r)
	w.WriteHeader(http.StatusBadGateway)
}

func TestRetriesAfterLostAnswersApplyOnce(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, testenv.Postgres(t), harnessOptions{})
	api, err := New(Config{DB: h.db, Ledger: h.ledger, Authenticate: h.authenticate, Clock: h.clock, Logger: debugLogger(h.logs)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&lossyProxy{next: api.Handler(), seen: map[string]bool{}})
	defer srv.Close()
	c, err := adminclient.NewClient(srv.URL, h.adminToken, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	// No waits between tries: the proxy answers the retry at once.
	c.Retry = adminclient.RetryPolicy{MaxAttempts: adminclient.DefaultMaxAttempts}

	team, created, err := c.CreateTeam(ctx, "search")
	if err != nil || created {
		t.Fatalf("CreateTeam through a lost answer = %+v, created %v, %v; want the team, found on retry", team, created, err)
	}
	credit, err := c.AddCredit(ctx, adminwire.CreditRequest{TeamID: team.ID, AmountMicrocredits: 1_000_000, IdempotencyKey: "g1"})
	if err != nil || !credit.Replayed {
		t.Errorf("AddCredit through a lost answer = %+v, %v; want the replayed entry", credit, err)
	}
	key, err := c.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team.ID}, "")
	if err != nil || !key.Replayed || key.Secret != "" {
		t.Errorf("CreateKey through a lost answer = %+v, %v; want the replayed key without its secret", key, err)
	}
	if _, _, err := c.PutModel(ctx, "llama-8b", adminwire.ModelSpec{ServedName: "m", MaxContextTokens: 10, MaxOutputTokens: 5}); err != nil {
		t.Errorf("PutModel through a lost answer: %v", err)
	}
	teams, _ := h.client.ListTeams(ctx)
	keys, _ := h.client.ListKeys(ctx, 0)
	if len(teams) != 1 || len(keys) != 1 {
		t.Fatalf("after retried creates: %d teams, %d keys; want 1 and 1", len(teams), len(keys))
	}
	if teams[0].BalanceMicrocredits != 1_000_000 {
		t.Errorf("balance after a retried grant = %d, want 1000000", teams[0].BalanceMicrocredits)
	}
}
