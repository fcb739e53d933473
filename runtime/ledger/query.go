package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Balance is a team's money in micro-credits.
type Balance struct {
	TeamID int64
	// Balance is Σ credits − Σ settled costs; it is negative only after a
	// correction or an overdrawing settle (see the package doc).
	Balance int64
	// Reserved is held by the team's open reservations.
	Reserved int64
	// Available is Balance − Reserved: what the next Reserve may take.
	Available int64
}

// Balance returns the team's balance and open reservations.
func (l *Ledger) Balance(ctx context.Context, teamID int64) (Balance, error) {
	b := Balance{TeamID: teamID}
	err := l.db.QueryRowContext(ctx,
		"SELECT balance_microcredits, reserved_microcredits FROM teams WHERE id = $1", teamID).
		Scan(&b.Balance, &b.Reserved)
	if errors.Is(err, sql.ErrNoRows) {
		return Balance{}, fmt.Errorf("balance of team %d: %w", teamID, ErrUnknownTeam)
	}
	if err != nil {
		return Balance{}, fmt.Errorf("balance of team %d: %w", teamID, err)
	}
	b.Available = b.Balance - b.Reserved
	return b, nil
}

// ModelUsage is a team's settled usage of one model over a period.
type ModelUsage struct {
	Model                                                      string
	Requests, PromptTokens, CompletionTokens, CostMicrocredits int64
}

// Usage returns the team's settled usage per model for requests created in
// [from, to), sorted by model. teamID must come from the caller's verified
// credential: the query sees no other team's rows. Reserved and cancelled
// rows are not usage. The sums saturate at math.MaxInt64 rather than fail
// (store.Dialect.SaturatingSum): settles bound every count, but a row
// written before they did must not cost its team its usage report.
func (l *Ledger) Usage(ctx context.Context, teamID int64, from, to time.Time) ([]ModelUsage, error) {
	sum := l.db.Dialect().SaturatingSum
	rows, err := l.db.QueryContext(ctx, `SELECT model, COUNT(*),
		`+sum("prompt_tokens")+`, `+sum("completion_tokens")+`, `+sum("cost_microcredits")+`
		FROM usage_ledger
		WHERE team_id = $1 AND status = 'settled' AND created_at >= $2 AND created_at < $3
		GROUP BY model ORDER BY model`, teamID, ceilMicro(from), ceilMicro(to))
	if err != nil {
		return nil, fmt.Errorf("usage of team %d: %w", teamID, err)
	}
	defer rows.Close()
	var out []ModelUsage
	for rows.Next() {
		var u ModelUsage
		if err := rows.Scan(&u.Model, &u.Requests, &u.PromptTokens, &u.CompletionTokens, &u.CostMicrocredits); err != nil {
			return nil, fmt.Errorf("usage of team %d: %w", teamID, err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage of team %d: %w", teamID, err)
	}
	return out, nil
}

// ceilMicro rounds t up to the microsecond, the precision rows are stamped
// at, so a bound keeps its meaning on PostgreSQL, which would round it to the
// nearest microsecond: for a row time r, r >= t iff r >= ceilMicro(t).
func ceilMicro(t time.Time) time.Time {
	u := t.UTC().Truncate(time.Microsecond)
	if u.Before(t) {
		u = u.Add(time.Microsecond)
	}
	return u
}
