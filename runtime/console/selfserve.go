package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/adminrules"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
)

// maxKeyForm bounds a personal key form's body: a name, a few models and
// four numbers fit in well under 64 KiB.
const maxKeyForm = 64 << 10

// SelfService is what the console changes of keys: a team's personal
// keys, within the team's switch and longest key life. *admin.SQLStore
// implements it.
type SelfService interface {
	GetTeam(ctx context.Context, id int64) (adminwire.Team, error)
	CreatePersonalKey(ctx context.Context, req adminwire.CreateKeyRequest, by string, now time.Time) (adminwire.CreatedKey, error)
	RevokePersonalKey(ctx context.Context, teamID, id int64, by string, now time.Time) (adminwire.Key, error)
}

var _ SelfService = (*admin.SQLStore)(nil)

// selfServiceForm is the create form's data on the keys page: shown only
// when the team allows personal keys.
type selfServiceForm struct {
	MaxDays     int
	DefaultDays int
	// Models are the models the member may give a key: the declared ones
	// their own credential may use.
	Models []string
	// Own are the member's own limits, the ceiling of a personal key's.
	Own auth.Limits
}

// keyCreatedView is the answer page of a created personal key: the only
// page that ever shows its secret.
type keyCreatedView struct {
	pageView
	Key    adminwire.Key
	Secret string
}

// checkForm refuses a console form not posted from this console with the
// session's token (the same two locks as sign-out), and reports whether it
// did.
func (c *Console) checkForm(ctx *gin.Context, se session) bool {
	ctx.Request.Body = http.MaxBytesReader(ctx.Writer, ctx.Request.Body, maxKeyForm)
	if sameOrigin(ctx.Request) && sameToken(se.CSRF, ctx.PostForm("csrf")) {
		return true
	}
	c.refuse(ctx, se, http.StatusForbidden, "Refused", "The form expired or was not sent from this console's own page; reload the page and try again.")
	return false
}

// refuse shows the error page titled title, with status.
func (c *Console) refuse(ctx *gin.Context, se session, status int, title, msg string) {
	c.render(ctx, status, "error", errorView{pageView: c.view(se, title, "keys", ""), Message: msg})
}

// selfServiceTeam reads the session's team when personal keys are on for
// it: ok false with an error page answered otherwise.
func (c *Console) selfServiceTeam(ctx *gin.Context, rctx context.Context, se session) (adminwire.Team, bool) {
	if c.cfg.SelfService == nil {
		c.refuse(ctx, se, http.StatusForbidden, "Refused", "Personal keys are not available on this platform.")
		return adminwire.Team{}, false
	}
	t, err := c.cfg.SelfService.GetTeam(rctx, se.Principal.TeamID)
	switch {
	case err != nil:
		c.cfg.Logger.Warn("console team unavailable", "err", err)
		c.renderUnavailable(ctx, se, "The team cannot be read: the platform database is not answering.")
		return adminwire.Team{}, false
	case !t.SelfServiceKeys:
		c.refuse(ctx, se, http.StatusForbidden, "Refused",
			"This team does not allow personal keys: the platform team turns them on per team (self_service_keys of llmplat_team).")
		return adminwire.Team{}, false
	}
	return t, true
}

// ownLimits are the signed-in credential's limits as they are now: an API
// key's are read again, since they may have changed since sign-in.
func (c *Console) ownLimits(rctx context.Context, p auth.Principal) (auth.Limits, error) {
	if p.Kind != auth.KindAPIKey {
		return p.Limits, nil
	}
	k, err := c.cfg.Directory.GetKey(rctx, p.KeyID)
	if err != nil {
		return auth.Limits{}, err
	}
	return auth.Limits{ModelAllowlist: k.ModelAllowlist, RPM: k.RPM, TokensPerDay: k.TokensPerDay,
		MaxStreams: k.MaxStreams, MaxTokens: k.MaxTokens}, nil
}

// selfServiceFormFor is the create form for the session's team, or nil
// when the team does not allow personal keys.
func (c *Console) selfServiceFormFor(rctx context.Context, se session) (*selfServiceForm, error) {
	if c.cfg.SelfService == nil {
		return nil, nil
	}
	t, err := c.cfg.SelfService.GetTeam(rctx, se.Principal.TeamID)
	if err != nil || !t.SelfServiceKeys {
		return nil, err
	}
	own, err := c.ownLimits(rctx, se.Principal)
	if err != nil {
		return nil, err
	}
	models, err := c.cfg.Directory.ListModels(rctx)
	if err != nil {
		return nil, err
	}
	f := &selfServiceForm{MaxDays: t.PersonalKeyMaxDays, DefaultDays: min(30, t.PersonalKeyMaxDays), Own: own}
	for _, m := range models {
		if len(own.ModelAllowlist) == 0 || slices.Contains(own.ModelAllowlist, m.Name) {
			f.Models = append(f.Models, m.Name)
		}
	}
	return f, nil
}

// createPersonalKey is POST /console/keys: a personal key for the team,
// named, scoped to a subset of the member's models, with limits no higher
// than the member's own and an expiry within the team's longest life. The
// answer page shows its secret, once.

func (c *Console) createPersonalKey(ctx *gin.Context) {
	se := current(ctx)
	if !c.checkForm(ctx, se) {
		return
	}
	rctx, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	t, ok := c.selfServiceTeam(ctx, rctx, se)
	if !ok {
		return
	}
	own, err := c.ownLimits(rctx, se.Principal)
	var declared []adminwire.Model
	if err == nil {
		declared, err = c.cfg.Directory.ListModels(rctx)
	}
	if err != nil {
		c.cfg.Logger.Warn("console key limits unavailable", "err", err)
		c.renderUnavailable(ctx, se, "The key cannot be made: the platform database is not answering.")
		return
	}
	now := c.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
	req, problem := personalKeyRequest(ctx, own, declared, t.PersonalKeyMaxDays, now)
	if problem != "" {
		c.refuse(ctx, se, http.StatusBadRequest, "Key not created", problem)
		return
	}
	req.TeamID = se.Principal.TeamID
	out, err := c.cfg.SelfService.CreatePersonalKey(rctx, req, se.Principal.Subject, now)
	switch {
	case errors.Is(err, admin.ErrSelfServiceOff):
		c.refuse(ctx, se, http.StatusForbidden, "Refused", "This team does not allow personal keys any more.")
		return
	case errors.Is(err, admin.ErrExpiryTooLong):
		c.refuse(ctx, se, http.StatusBadRequest, "Key not created", fmt.Sprintf("A personal key lives at most %d days.", t.PersonalKeyMaxDays))
		return
	case err != nil:
		c.cfg.Logger.Warn("console personal key not created", "err", err)
		c.renderUnavailable(ctx, se, "The key cannot be made: the platform database is not answering.")
		return
	}
	c.cfg.Logger.Info("console personal key created", "team_id", req.TeamID, "key_id", out.ID, "by", se.Principal.Subject)
	out.Status = out.StatusAt(now)
	c.render(ctx, http.StatusCreated, "key_created", keyCreatedView{pageView: c.view(se, "Key created", "keys", ""),
		Key: out.Key, Secret: out.Secret})
}

// personalKeyRequest reads the create form: a problem in words when a
// field is out of bounds. A limit left blank is the member's own; a model
// list left empty is the member's own allowlist.
func personalKeyRequest(ctx *gin.Context, own auth.Limits, declared []adminwire.Model, maxDays int, now time.Time) (adminwire.CreateKeyRequest, string) {
	var req adminwire.CreateKeyRequest
	req.Name = strings.TrimSpace(ctx.PostForm("name"))
	if req.Name == "" {
		return req, "Give the key a name, so the team knows which service holds it."
	}
	if e := adminrules.KeyName(req.Name); e != nil {
		return req, "The name " + strings.TrimPrefix(e.Msg, "name ") + "."
	}
	for _, m := range ctx.PostFormArray("model") {
		known := slices.ContainsFunc(declared, func(d adminwire.Model) bool { return d.Name == m })
		if !known || (len(own.ModelAllowlist) > 0 && !slices.Contains(own.ModelAllowlist, m)) {
			return req, fmt.Sprintf("The model %q is not one your own credential may use.", m)
		}
		if !slices.Contains(req.ModelAllowlist, m) {
			req.ModelAllowlist = append(req.ModelAllowlist, m)
		}
	}
	if len(req.ModelAllowlist) == 0 {
		req.ModelAllowlist = slices.Clone(own.ModelAllowlist)
	}
	limits := []struct {
		field, label string
		own, max     int64
		set          func(int64)
	}{
		{"rpm", "Requests per minute", int64(own.RPM), adminrules.MaxInt32Limit, func(v int64) { req.RPM = int(v) }},
		{"tokens_per_day", "Tokens per day", own.TokensPerDay, adminrules.MaxInt64Limit, func(v int64) { req.TokensPerDay = v }},
		{"max_streams", "Streams", int64(own.MaxStreams), adminrules.MaxInt32Limit, func(v int64) { req.MaxStreams = int(v) }},
		{"max_tokens", "Max tokens", int64(own.MaxTokens), adminrules.MaxInt32Limit, func(v int64) { req.MaxTokens = int(v) }},
	}
	for _, l := range limits {
		v, problem := limitField(ctx.PostForm(l.field), l.label, l.own, l.max)
		if problem != "" {
			return req, problem
		}
		l.set(v)
	}
	days, err := strconv.Atoi(strings.TrimSpace(ctx.PostForm("days")))
	if err != nil || days < 1 || days > maxDays {
		return req, fmt.Sprintf("The key must expire in 1 to %d days: the platform sets that bound for this team.", maxDays)
	}
	exp := now.Add(time.Duration(days) * 24 * time.Hour)
	req.ExpiresAt = &exp
	return req, ""
}

// limitField reads one limit: blank is the member's own (ownV, 0 for
// none); a number must be from 1 to limitMax (the column's bound) and,
// under a limit of the member's, no higher than it.
func limitField(s, label string, ownV, limitMax int64) (int64, string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return ownV, ""
	}
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil || v < 1 || v > limitMax:
		return 0, fmt.Sprintf("%s must be a whole number from 1 up, or blank for your own limit.", label)
	case ownV > 0 && v > ownV:
		return 0, fmt.Sprintf("%s can be at most %d: a personal key's limits are within your own.", label, ownV)
	}
	return v, ""
}

// revokePersonalKey is POST /console/keys/{id}/revoke: revokes one of the
// team's personal keys, then tells every gateway. A managed key (made
// through the admin API) is refused with 403, a key of another team is
// 404 as if it did not exist.
func (c *Console) revokePersonalKey(ctx *gin.Context) {
	se := current(ctx)
	if !c.checkForm(ctx, se) {
		return
	}
	id, err := strconv.ParseInt(ctx.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		c.refuse(ctx, se, http.StatusNotFound, "Not found", "This team has no such key.")
		return
	}
	if c.cfg.SelfService == nil {
		c.refuse(ctx, se, http.StatusForbidden, "Refused", "Personal keys are not available on this platform.")
		return
	}
	rctx, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	now := c.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
	_, err = c.cfg.SelfService.RevokePersonalKey(rctx, se.Principal.TeamID, id, se.Principal.Subject, now)
	switch {
	case errors.Is(err, admin.ErrKeyManaged):
		c.refuse(ctx, se, http.StatusForbidden, "Refused",
			"This key is managed: it was declared through the admin API (by Terraform or the platform team), so it is read-only here. "+
				"Remove it from the Terraform configuration, or ask the platform team.")
		return
	case errors.Is(err, admin.ErrNotFound):
		c.refuse(ctx, se, http.StatusNotFound, "Not found", "This team has no such key.")
		return
	case err != nil:
		c.cfg.Logger.Warn("console personal key not revoked", "err", err)
		c.renderUnavailable(ctx, se, "The key cannot be revoked: the platform database is not answering.")
		return
	}
	c.cfg.Logger.Info("console personal key revoked", "team_id", se.Principal.TeamID, "key_id", id, "by", se.Principal.Subject)
	if c.cfg.Revoker != nil {
		if err := c.cfg.Revoker.RevokeKeyID(rctx, id); err != nil {
			c.cfg.Logger.Warn("console key revocation not broadcast", "key_id", id, "err", err)
			c.renderUnavailable(ctx, se, "The key is revoked, but the gateways were not told yet: send the form again.")
			return
		}
	}
	ctx.Redirect(http.StatusSeeOther, Path+"/keys")
}
