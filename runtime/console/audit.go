package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// auditEvents is how many events the audit page lists, newest first: a
// team makes a few keys and grants a month, so this covers months.
const auditEvents = 200

// Audit event kinds, as the page names them.
const (
	auditKeyCreated  = "key created"
	auditKeyRevoked  = "key revoked"
	auditCreditGrant = "credit granted"
)

// auditEvent is one line of the team's audit list.
type auditEvent struct {
	At   time.Time
	Kind string
	// By is who did it: a key's prefix or a JWT's subject for a console
	// action, "admin API (<subject>)" for the admin API; empty when the
	// platform did not record it (keys made before it did).
	By string
	// Key is the key concerned (name, prefix, managed or personal).
	Key *adminwire.Key
	// AmountMicrocredits and Note are a credit grant's.
	AmountMicrocredits int64
	Note               string
}

// auditView is the audit page's data.
type auditView struct {
	pageView
	Events []auditEvent
}

// teamAudit returns the team's latest events, newest first: each key's
// creation and revocation (from api_keys, which records who did each) and
// each credit entry (from the ledger's credit_entries, made only through
// the admin API).
func (c *Console) teamAudit(ctx context.Context, teamID int64) ([]auditEvent, error) {
	keys, err := c.cfg.Directory.ListKeys(ctx, teamID)
	if err != nil {
		return nil, fmt.Errorf("audit of team %d: %w", teamID, err)
	}
	var out []auditEvent
	for i := range keys {
		k := &keys[i]
		out = append(out, auditEvent{At: k.CreatedAt, Kind: auditKeyCreated, By: k.CreatedBy, Key: k})
		if k.RevokedAt != nil {
			out = append(out, auditEvent{At: *k.RevokedAt, Kind: auditKeyRevoked, By: k.RevokedBy, Key: k})
		}
	}
	rows, err := c.cfg.DB.QueryContext(ctx, `SELECT amount_microcredits, note, created_at FROM credit_entries
		WHERE team_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, teamID, auditEvents)
	if err != nil {
		return nil, fmt.Errorf("audit credit of team %d: %w", teamID, err)
	}
	defer rows.Close()
	for rows.Next() {
		e := auditEvent{Kind: auditCreditGrant, By: "admin API"}
		if err := rows.Scan(&e.AmountMicrocredits, &e.Note, &e.At); err != nil {
			return nil, fmt.Errorf("audit credit of team %d: %w", teamID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit credit of team %d: %w", teamID, err)
	}
	slices.SortStableFunc(out, func(a, b auditEvent) int { return b.At.Compare(a.At) })
	return out[:min(len(out), auditEvents)], nil
}

// auditPage is GET /console/audit: who made and revoked the team's keys,
// and the credit granted to it.
func (c *Console) auditPage(ctx *gin.Context) {
	se := current(ctx)
	rctx, cancel := c.budget(ctx.Request.Context())
	defer cancel()
	v := auditView{pageView: c.view(se, "Audit", "audit",
		"the team's API keys in the platform database (who made and revoked each) and the ledger's credit entries; newest first, at most 200")}
	var err error
	if v.Events, err = c.teamAudit(rctx, se.Principal.TeamID); err != nil {
		c.cfg.Logger.Warn("console audit unavailable", "err", err)
		c.renderUnavailable(ctx, se, "The audit list cannot be read: the platform database is not answering.")
		return
	}
	c.render(ctx, http.StatusOK, "audit", v)
}
