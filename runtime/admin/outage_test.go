package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestDatabaseOutageIs503: with PostgreSQL down, the admin API answers
// 503 with Retry-After, never 500, so the client (and the Terraform
// provider on it) retries an outage and nothing else; once the database is
// back, the API serves again without a restart.
func TestDatabaseOutageIs503(t *testing.T) {
	u, err := url.Parse(testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewFaultProxy(t, u.Host)
	u.Host = proxy.Addr()
	h := newHarness(t, u.String(), harnessOptions{})
	team := h.team(t, "search")

	proxy.Cut()
	calls := []struct{ method, path, body string }{
		{http.MethodGet, "/admin/teams", ""},
		{http.MethodGet, "/admin/teams/" + itoa(team), ""},
		{http.MethodPost, "/admin/teams", `{"name":"ads"}`},
		{http.MethodPost, "/admin/credits", `{"team_id":` + itoa(team) + `,"amount_microcredits":5,"idempotency_key":"g-1"}`},
	}
	for _, c := range calls {
		status, body, hdr := h.raw(t, c.method, c.path, c.body, nil)
		if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(body, `"code":"unavailable"`) {
			t.Errorf("%s %s with the database down = %d %s (Retry-After %q), want 503 unavailable with Retry-After",
				c.method, c.path, status, body, hdr.Get("Retry-After"))
		}
	}
	// The client retries the outage, then reports the 503 itself.
	_, err = h.client.GetTeam(context.Background(), team)
	var ae *adminwire.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Errorf("client during the outage: %v, want the 503", err)
	}

	proxy.Restore()
	testenv.EventuallyNil(t, 30*time.Second, "the admin api to serve again after the database came back", func() error {
		got, err := h.client.GetTeam(context.Background(), team)
		if err == nil && got.ID != team {
			err = fmt.Errorf("team %d, want %d", got.ID, team)
		}
		return err
	})
}
