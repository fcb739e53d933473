package console

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
)

const (
	// recentGrants is how many credit grants the balance page lists.
	recentGrants = 10
	// lastUseLookback bounds the search for a key's last use: the team's
	// ledger index is read backwards from now for at most this long, so a
	// long-idle key costs a bounded read and shows "not in 30 days".
	lastUseLookback = 30 * 24 * time.Hour
)

// grant is a credit entry as the balance page lists it.
type grant struct {
	AmountMicrocredits int64
	Note               string
	CreatedAt          time.Time
}

// recentCredit returns the team's latest credit grants, newest first.
func (c *Console) recentCredit(ctx context.Context, teamID int64) ([]grant, error) {
	rows, err := c.cfg.DB.QueryContext(ctx, `SELECT amount_microcredits, note, created_at FROM credit_entries
		WHERE team_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, teamID, recentGrants)
	if err != nil {
		return nil, fmt.Errorf("recent credit of team %d: %w", teamID, err)
	}
	defer rows.Close()
	var out []grant
	for rows.Next() {
		var g grant
		if err := rows.Scan(&g.AmountMicrocredits, &g.Note, &g.CreatedAt); err != nil {
			return nil, fmt.Errorf("recent credit of team %d: %w", teamID, err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// lastUse returns when the key last opened a ledger row within
// lastUseLookback, or nil.
func (c *Console) lastUse(ctx context.Context, teamID, keyID int64) (*time.Time, error) {
	var t time.Time
	err := c.cfg.DB.QueryRowContext(ctx, `SELECT created_at FROM usage_ledger
		WHERE team_id = $1 AND key_id = $2 AND created_at >= $3 ORDER BY created_at DESC LIMIT 1`,
		teamID, keyID, c.cfg.Clock.Now().UTC().Add(-lastUseLookback)).Scan(&t)
	switch {
	case err == nil:
		return &t, nil
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	default:
		return nil, fmt.Errorf("last use of key %d: %w", keyID, err)
	}
}

// balanceView is the balance page's data.
type balanceView struct {
	pageView
	Balance ledger.Balance
	Grants  []grant
}

func (c *Console) balancePage(ctx *gin.Context) {
	se := current(ctx)
	rctx, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	v := balanceView{pageView: c.view(se, "Balance", "balance",
		"the team's row in the ledger (balance = credit granted − settled cost; reserved = open requests) and its credit entries")}
	var err error
	if v.Balance, err = c.cfg.Ledger.Balance(rctx, se.Principal.TeamID); err == nil {
		v.Grants, err = c.recentCredit(rctx, se.Principal.TeamID)
	}
	if err != nil {
		c.cfg.Logger.Warn("console balance unavailable", "err", err)
		c.renderUnavailable(ctx, se, "The balance cannot be read: the ledger database is not answering.")
		return
	}
	c.render(ctx, http.StatusOK, "balance", v)
}

// keyRow is a key as the keys page lists it: never its secret.
type keyRow struct {
	adminwire.Key
	LastUsed *time.Time
	Mine     bool
	// Refused is how many of the key's requests its limits refused (429)
	// in the last quota.RefusalWindow.
	Refused int64
}

// keysView is the keys page's data.
type keysView struct {
	pageView
	Keys []keyRow
	// RefusalsUnavailable says the 429 counts could not be read.
	RefusalsUnavailable bool
	// Form is the personal key form, when the team allows personal keys.
	Form *selfServiceForm
}

// refusals returns the 429s of the API key id in the last
// quota.RefusalWindow, from the counters the gateway keeps in Redis.
func (c *Console) refusals(ctx context.Context, id int64) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	quotaID := auth.Principal{Kind: auth.KindAPIKey, KeyID: id}.QuotaID()
	return quota.ReadRefusals(rctx, c.cfg.Redis, quota.NewKeys(c.cfg.Prefix), quotaID, c.cfg.Clock.Now())
}

func (c *Console) keysPage(ctx *gin.Context) {
	se := current(ctx)
	rctx, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	v := keysView{pageView: c.view(se, "Keys", "keys",
		"the team's API keys in the platform database (only their prefixes are kept); for last use, the ledger's newest row per key within 30 days; "+
			"for 429s, the gateways' per-minute refusal counters in Redis over the last hour")}
	keys, err := c.cfg.Directory.ListKeys(rctx, se.Principal.TeamID)
	for _, k := range keys {
		if err != nil {
			break
		}
		k.Status = k.StatusAt(c.cfg.Clock.Now())
		row := keyRow{Key: k, Mine: k.ID == se.Principal.KeyID}
		row.LastUsed, err = c.lastUse(rctx, se.Principal.TeamID, k.ID)
		if !v.RefusalsUnavailable {
			var rerr error
			if row.Refused, rerr = c.refusals(rctx, k.ID); rerr != nil {
				c.cfg.Logger.Warn("console key refusals unavailable", "err", rerr)
				v.RefusalsUnavailable = true
			}
		}
		v.Keys = append(v.Keys, row)
	}
	if err == nil {
		v.Form, err = c.selfServiceFormFor(rctx, se)
	}
	if err != nil {
		c.cfg.Logger.Warn("console keys unavailable", "err", err)
		c.renderUnavailable(ctx, se, "The keys cannot be read: the platform database is not answering.")
		return
	}
	c.render(ctx, http.StatusOK, "keys", v)
}

// modelsView is the models page's data.
type modelsView struct {
	pageView
	Models []adminwire.Model
}

// modelsPage lists the models the signed-in credential may use, as GET
// /v1/models does, with prices and context limits.
func (c *Console) modelsPage(ctx *gin.Context) {
	se := current(ctx)
	rctx, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	v := modelsView{pageView: c.view(se, "Models", "models",
		"the platform's model declarations, filtered by the signed-in key's model allowlist")}
	models, err := c.cfg.Directory.ListModels(rctx)
	if err != nil {
		c.cfg.Logger.Warn("console models unavailable", "err", err)
		c.renderUnavailable(ctx, se, "The models cannot be read: the platform database is not answering.")
		return
	}
	for _, m := range models {
		if se.Principal.AllowsModel(m.Name) {
			v.Models = append(v.Models, m)
		}
	}
	c.render(ctx, http.StatusOK, "models", v)
}
