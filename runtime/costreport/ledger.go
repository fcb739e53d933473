package costreport

import (
	"context"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/store"
)

// TeamUsage is one team's settled usage of one model in a window.
type TeamUsage struct {
	TeamID             int64  `json:"team_id"`
	Team               string `json:"team"`
	Requests           int64  `json:"requests"`
	PromptTokens       int64  `json:"prompt_tokens"`
	CompletionTokens   int64  `json:"completion_tokens"`
	BilledMicrocredits int64  `json:"billed_microcredits"`
}

// LedgerUsage is what the ledger settled in a window: per model (the
// ledger's model name), the usage of each team, by team name, and the UTC
// clock hours (by their start in Unix seconds) in which at least one
// settled request of the model arrived.
type LedgerUsage struct {
	Teams       map[string][]TeamUsage
	ActiveHours map[string]map[int64]bool
}

// active reports whether a settled request of model arrived in the clock
// hour that holds t.
func (u LedgerUsage) active(model string, t time.Time) bool {
	return u.ActiveHours[model][t.Truncate(time.Hour).Unix()]
}

// hourLayout is how the active-hours queries print a clock hour, in UTC.
const hourLayout = "2006-01-02 15"

// hourExpr prints created_at's UTC clock hour as hourLayout, per dialect.
var hourExpr = map[store.Dialect]string{
	store.Postgres: `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24')`,
	store.SQLite:   `strftime('%Y-%m-%d %H', created_at)`,
}

// ReadLedger returns the settled usage of requests created in w, per model
// and team. Reserved and cancelled rows are not usage.
func ReadLedger(ctx context.Context, db *store.DB, w Window) (LedgerUsage, error) {
	u := LedgerUsage{Teams: map[string][]TeamUsage{}, ActiveHours: map[string]map[int64]bool{}}
	from, to := ceilMicro(w.From), ceilMicro(w.To)
	rows, err := db.QueryContext(ctx, `SELECT u.model, u.team_id, t.name, COUNT(*),
		CAST(SUM(u.prompt_tokens) AS BIGINT), CAST(SUM(u.completion_tokens) AS BIGINT),
		CAST(SUM(u.cost_microcredits) AS BIGINT)
		FROM usage_ledger u JOIN teams t ON t.id = u.team_id
		WHERE u.status = 'settled' AND u.created_at >= $1 AND u.created_at < $2
		GROUP BY u.model, u.team_id, t.name ORDER BY u.model, t.name`, from, to)
	if err != nil {
		return LedgerUsage{}, fmt.Errorf("read ledger usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			model string
			t     TeamUsage
		)
		if err := rows.Scan(&model, &t.TeamID, &t.Team, &t.Requests, &t.PromptTokens, &t.CompletionTokens,
			&t.BilledMicrocredits); err != nil {
			return LedgerUsage{}, fmt.Errorf("read ledger usage: %w", err)
		}
		u.Teams[model] = append(u.Teams[model], t)
	}
	if err := rows.Err(); err != nil {
		return LedgerUsage{}, fmt.Errorf("read ledger usage: %w", err)
	}
	if err := readActiveHours(ctx, db, from, to, u.ActiveHours); err != nil {
		return LedgerUsage{}, err
	}
	return u, nil
}

// readActiveHours fills active with the clock hours, per model, in which a
// settled request created in [from, to) arrived.
func readActiveHours(ctx context.Context, db *store.DB, from, to time.Time, active map[string]map[int64]bool) error {
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT model, `+hourExpr[db.Dialect()]+`
		FROM usage_ledger WHERE status = 'settled' AND created_at >= $1 AND created_at < $2`, from, to)
	if err != nil {
		return fmt.Errorf("read active hours: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var model, hour string
		if err := rows.Scan(&model, &hour); err != nil {
			return fmt.Errorf("read active hours: %w", err)
		}
		h, err := time.Parse(hourLayout, hour)
		if err != nil {
			return fmt.Errorf("read active hours: %w", err)
		}
		if active[model] == nil {
			active[model] = map[int64]bool{}
		}
		active[model][h.Unix()] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read active hours: %w", err)
	}
	return nil
}
