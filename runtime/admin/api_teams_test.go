package admin

import (
	"context"
	"net/http"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/ledger"
)

func TestTeamsAPI(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			c := h.client
			first, created, err := c.CreateTeam(ctx, "search")
			if err != nil || !created || first.ID == 0 || first.Name != "search" {
				t.Fatalf("CreateTeam = %+v, created %v, %v", first, created, err)
			}
			again, created, err := c.CreateTeam(ctx, "search")
			if err != nil || created || again != first {
				t.Errorf("CreateTeam again = %+v, created %v, %v; want %+v with 200", again, created, err, first)
			}
			if _, err := c.AddCredit(ctx, adminwire.CreditRequest{TeamID: first.ID, AmountMicrocredits: 5_000_000, IdempotencyKey: "grant-1"}); err != nil {
				t.Fatal(err)
			}
			got, err := c.GetTeam(ctx, first.ID)
			if err != nil || got.BalanceMicrocredits != 5_000_000 || got.AvailableMicrocredits != 5_000_000 || got.ReservedMicrocredits != 0 {
				t.Errorf("GetTeam = %+v, %v; want balance and available 5000000", got, err)
			}
			ads := h.team(t, "ads")
			list, err := c.ListTeams(ctx)
			if err != nil || len(list) != 2 || list[0].ID != first.ID || list[1].ID != ads || list[0].BalanceMicrocredits != 5_000_000 {
				t.Errorf("ListTeams = %+v, %v", list, err)
			}
			name := "search-2"
			renamed, err := c.UpdateTeam(ctx, first.ID, adminwire.UpdateTeamRequest{Name: &name})
			if err != nil || renamed.Name != name || renamed.ID != first.ID {
				t.Errorf("UpdateTeam = %+v, %v", renamed, err)
			}
			taken := "ads"
			_, err = c.UpdateTeam(ctx, first.ID, adminwire.UpdateTeamRequest{Name: &taken})
			wantAPIError(t, "rename onto a taken name", err, http.StatusConflict, "name")
			_, err = c.GetTeam(ctx, 999)
			wantAPIError(t, "get a missing team", err, http.StatusNotFound, "id")
			_, err = c.UpdateTeam(ctx, 999, adminwire.UpdateTeamRequest{Name: &name})
			wantAPIError(t, "rename a missing team", err, http.StatusNotFound, "id")
			_, _, err = c.CreateTeam(ctx, "no spaces allowed")
			wantAPIError(t, "team name with spaces", err, http.StatusBadRequest, "name")
		})
	}
}

func TestCreditsAPI(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			c := h.client
			team := h.team(t, "search")
			req := adminwire.CreditRequest{TeamID: team, AmountMicrocredits: 2_500_000, IdempotencyKey: "invoice-42", Note: "march"}
			first, err := c.AddCredit(ctx, req)
			if err != nil || first.Replayed || first.ID == 0 || first.AmountMicrocredits != 2_500_000 || first.Note != "march" {
				t.Fatalf("AddCredit = %+v, %v", first, err)
			}
			status, _, _ := h.raw(t, http.MethodPost, "/admin/credits",
				`{"team_id":`+itoa(team)+`,"amount_microcredits":2500000,"idempotency_key":"invoice-42","note":"march"}`, nil)
			if status != http.StatusOK {
				t.Errorf("replayed grant status = %d, want 200", status)
			}
			replay, err := c.AddCredit(ctx, req)
			if err != nil || !replay.Replayed || replay.ID != first.ID {
				t.Errorf("replayed AddCredit = %+v, %v; want entry %d replayed", replay, err, first.ID)
			}
			conflict := req
			conflict.AmountMicrocredits = 9
			_, err = c.AddCredit(ctx, conflict)
			wantAPIError(t, "same key, other amount", err, http.StatusConflict, "idempotency_key")
			if ae := apiError(t, err); ae.Code != codeIdempotency {
				t.Errorf("conflict code = %q, want %q", ae.Code, codeIdempotency)
			}
			correction, err := c.AddCredit(ctx, adminwire.CreditRequest{TeamID: team, AmountMicrocredits: -500_000, IdempotencyKey: "fix-1"})
			if err != nil || correction.Replayed {
				t.Errorf("negative correction = %+v, %v", correction, err)
			}
			got, err := c.GetTeam(ctx, team)
			if err != nil || got.BalanceMicrocredits != 2_000_000 {
				t.Errorf("balance after grant, replays, conflict and correction = %d, %v; want 2000000", got.BalanceMicrocredits, err)
			}
			_, err = c.AddCredit(ctx, adminwire.CreditRequest{TeamID: 999, AmountMicrocredits: 1, IdempotencyKey: "x"})
			wantAPIError(t, "grant to a missing team", err, http.StatusNotFound, "team_id")
			_, err = c.AddCredit(ctx, adminwire.CreditRequest{TeamID: team, AmountMicrocredits: 0, IdempotencyKey: "y"})
			wantAPIError(t, "zero grant", err, http.StatusBadRequest, "amount_microcredits")
			_, err = c.AddCredit(ctx, adminwire.CreditRequest{TeamID: team, AmountMicrocredits: 1})
			wantAPIError(t, "grant without a key", err, http.StatusBadRequest, "idempotency_key")
			// A run of grants may not overflow the balance: the one that would
			// pass ledger.MaxBalance is a 409 naming the amount, not a 500.
			if _, err := h.db.ExecContext(ctx, "UPDATE teams SET balance_microcredits = $1 WHERE id = $2", int64(ledger.MaxBalance), team); err != nil {
				t.Fatal(err)
			}
			_, err = c.AddCredit(ctx, adminwire.CreditRequest{TeamID: team, AmountMicrocredits: 1_000_000, IdempotencyKey: "one-too-many"})
			wantAPIError(t, "grant past the balance's range", err, http.StatusConflict, "amount_microcredits")
			if ae := apiError(t, err); ae.Code != codeBalanceRange {
				t.Errorf("overflow code = %q, want %q", ae.Code, codeBalanceRange)
			}
			if list, err := c.ListTeams(ctx); err != nil || len(list) != 1 || list[0].BalanceMicrocredits != ledger.MaxBalance {
				t.Errorf("ListTeams after the refused grant = %+v, %v", list, err)
			}
		})
	}
}

// TestGetCreditAPI: a credit entry reads back by id as it was recorded; a
// missing one is a 404 naming the id.
func TestGetCreditAPI(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			team := h.team(t, "search")
			granted, err := h.client.AddCredit(ctx, adminwire.CreditRequest{TeamID: team, AmountMicrocredits: -1_500_000,
				IdempotencyKey: "fix-7", Note: "refund"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := h.client.GetCredit(ctx, granted.ID)
			if err != nil {
				t.Fatal(err)
			}
			granted.Replayed = false
			if got != granted {
				t.Errorf("GetCredit = %+v, want the entry as granted %+v", got, granted)
			}
			_, err = h.client.GetCredit(ctx, granted.ID+1)
			wantAPIError(t, "a missing entry", err, http.StatusNotFound, "id")
			if status, _, _ := h.raw(t, http.MethodGet, "/admin/credits/abc", "", nil); status != http.StatusBadRequest {
				t.Errorf("GET /admin/credits/abc = %d, want 400", status)
			}
		})
	}
}

// TestTeamSelfServiceAPI: PATCH /admin/teams/{id} sets the self-service
// switch and the longest personal key life, each alone, and refuses a life
// out of range naming the field; GET and the list show both; a key made
// through the API is managed and names the admin credential that made and
// revoked it.
func TestTeamSelfServiceAPI(t *testing.T) {
	ctx := context.Background()
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			h := newHarness(t, dc.dsn(t), harnessOptions{})
			c := h.client
			id := h.team(t, "search")
			on, days := true, 30
			got, err := c.UpdateTeam(ctx, id, adminwire.UpdateTeamRequest{SelfServiceKeys: &on})
			if err != nil || !got.SelfServiceKeys || got.PersonalKeyMaxDays != 90 {
				t.Fatalf("switch on: %+v %v, want on with the default 90 days", got, err)
			}
			got, err = c.UpdateTeam(ctx, id, adminwire.UpdateTeamRequest{PersonalKeyMaxDays: &days})
			if err != nil || !got.SelfServiceKeys || got.PersonalKeyMaxDays != 30 {
				t.Fatalf("set 30 days: %+v %v, want on and 30", got, err)
			}
			list, err := c.ListTeams(ctx)
			if err != nil || len(list) != 1 || !list[0].SelfServiceKeys || list[0].PersonalKeyMaxDays != 30 {
				t.Errorf("ListTeams = %+v, %v", list, err)
			}
			for _, bad := range []int{0, -1, 3651} {
				_, err = c.UpdateTeam(ctx, id, adminwire.UpdateTeamRequest{PersonalKeyMaxDays: &bad})
				wantAPIError(t, "personal_key_max_days "+itoa(int64(bad)), err, http.StatusBadRequest, "personal_key_max_days")
			}
			k, err := c.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: id, Name: "tf"}, "")
			if err != nil || k.Origin != adminwire.KeyOriginAdmin || !k.Managed() || k.CreatedBy == "" {
				t.Fatalf("CreateKey: %+v %v, want a managed key naming its maker", k, err)
			}
			r, err := c.RevokeKey(ctx, k.ID)
			if err != nil || r.RevokedBy == "" {
				t.Errorf("RevokeKey: %+v %v, want its revoker named", r, err)
			}
		})
	}
}
