package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/adminrules"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/ledger"
)

// pathID parses the positive integer path parameter name; on failure it
// has answered 400.
func pathID(c *gin.Context, name string) (int64, bool) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id <= 0 {
		badRequest(c, codeInvalidValue, invalid(name, "%s must be a positive integer", name))
		return 0, false
	}
	return id, true
}

// withBalance fills t's money from the ledger.
func (a *API) withBalance(ctx context.Context, t adminwire.Team) (adminwire.Team, error) {
	b, err := a.cfg.Ledger.Balance(ctx, t.ID)
	if err != nil {
		return adminwire.Team{}, fmt.Errorf("team %d balance: %w", t.ID, err)
	}
	t.BalanceMicrocredits, t.ReservedMicrocredits, t.AvailableMicrocredits = b.Balance, b.Reserved, b.Available
	return t, nil
}

// createTeam is POST /admin/teams: 201 with a new team, 200 with the
// existing team of that name; create only (adminwire.CreateOnlyHeader),
// 409 for an existing name and 200 for a repeat of its Idempotency-Key.
func (a *API) createTeam(c *gin.Context) {
	only, idem, ok := createOnly(c)
	if !ok {
		return
	}
	var req adminwire.CreateTeamRequest
	present, ok := decodeBody(c, &req)
	if !ok {
		return
	}
	if !present["name"] {
		badRequest(c, codeInvalidValue, invalid("name", "name is required"))
		return
	}
	if e := checkIdent("name", req.Name); e != nil {
		badRequest(c, codeInvalidValue, e)
		return
	}
	ctx := c.Request.Context()
	var (
		t       adminwire.Team
		created bool
		err     error
	)
	if only {
		t, created, err = a.store.CreateTeamOnly(ctx, req.Name, idem, a.now())
	} else {
		t, created, err = a.store.CreateTeam(ctx, req.Name, a.now())
	}
	if err == nil {
		t, err = a.withBalance(ctx, t)
	}
	if err != nil {
		a.fail(c, err, paramFor(err, "", adminwire.IdempotencyHeader), "team")
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(c, status, t)
}

// listTeams is GET /admin/teams.
func (a *API) listTeams(c *gin.Context) {
	ctx := c.Request.Context()
	teams, err := a.store.ListTeams(ctx)
	for i := 0; err == nil && i < len(teams); i++ {
		teams[i], err = a.withBalance(ctx, teams[i])
	}
	if err != nil {
		a.fail(c, err, "", "team")
		return
	}
	writeJSON(c, http.StatusOK, adminwire.List[adminwire.Team]{Data: teams})
}

// getTeam is GET /admin/teams/{id}.
func (a *API) getTeam(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	ctx := c.Request.Context()
	t, err := a.store.GetTeam(ctx, id)
	if err == nil {
		t, err = a.withBalance(ctx, t)
	}
	if err != nil {
		a.fail(c, err, "id", "team")
		return
	}
	writeJSON(c, http.StatusOK, t)
}

// updateTeam is PATCH /admin/teams/{id}: a rename, the self-service
// switch and the longest life of a personal key, each when present.
func (a *API) updateTeam(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var req adminwire.UpdateTeamRequest
	if _, ok := decodeBody(c, &req); !ok {
		return
	}
	ctx := c.Request.Context()
	var (
		t   adminwire.Team
		err error
	)
	if req.PersonalKeyMaxDays != nil {
		if e := refused(adminrules.PersonalKeyMaxDays(int64(*req.PersonalKeyMaxDays))); e != nil {
			badRequest(c, codeInvalidValue, e)
			return
		}
	}
	if req.Name != nil {
		if e := checkIdent("name", *req.Name); e != nil {
			badRequest(c, codeInvalidValue, e)
			return
		}
		t, err = a.store.RenameTeam(ctx, id, *req.Name)
	} else {
		t, err = a.store.GetTeam(ctx, id)
	}
	if err == nil && (req.SelfServiceKeys != nil || req.PersonalKeyMaxDays != nil) {
		t, err = a.store.SetSelfService(ctx, id, req.SelfServiceKeys, req.PersonalKeyMaxDays)
	}
	if err == nil {
		t, err = a.withBalance(ctx, t)
	}
	if err != nil {
		a.fail(c, err, "id", "team")
		return
	}
	writeJSON(c, http.StatusOK, t)
}

// releaseTeam is POST /admin/teams/{id}/release: 200 with the team and
// its released_at; a create-only POST /admin/teams of its name takes it
// back.
func (a *API) releaseTeam(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	ctx := c.Request.Context()
	t, err := a.store.ReleaseTeam(ctx, id, a.now())
	if err == nil {
		t, err = a.withBalance(ctx, t)
	}
	if err != nil {
		a.fail(c, err, "id", "team")
		return
	}
	writeJSON(c, http.StatusOK, t)
}

// addCredit is POST /admin/credits: 201 for a new entry, 200 for a replay
// of the same idempotency key, 409 when the key was used otherwise.
func (a *API) addCredit(c *gin.Context) {
	var req adminwire.CreditRequest
	if _, ok := decodeBody(c, &req); !ok {
		return
	}
	if e := validateCredit(&req); e != nil {
		badRequest(c, codeInvalidValue, e)
		return
	}
	ctx := c.Request.Context()
	if _, err := a.store.GetTeam(ctx, req.TeamID); err != nil {
		a.fail(c, err, "team_id", "team")
		return
	}
	cr, err := a.cfg.Ledger.AddCredit(ctx, req.TeamID, req.IdempotencyKey, req.AmountMicrocredits, req.Note)
	if err != nil {
		a.fail(c, err, "idempotency_key", "team")
		return
	}
	status := http.StatusOK
	if cr.Applied {
		status = http.StatusCreated
	}
	out := creditOut(cr)
	out.Replayed = !cr.Applied
	writeJSON(c, status, out)
}

// getCredit is GET /admin/credits/{id}: one ledger credit entry.
func (a *API) getCredit(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	cr, err := a.cfg.Ledger.Credit(c.Request.Context(), id)
	if errors.Is(err, ledger.ErrNotFound) {
		err = fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		a.fail(c, err, "id", "credit entry")
		return
	}
	writeJSON(c, http.StatusOK, creditOut(cr))
}

// creditOut is the wire form of a credit entry.
func creditOut(cr ledger.Credit) adminwire.Credit {
	return adminwire.Credit{ID: cr.ID, TeamID: cr.TeamID, AmountMicrocredits: cr.Amount, IdempotencyKey: cr.IdempotencyKey,
		Note: cr.Note, CreatedAt: cr.CreatedAt.UTC()}
}
