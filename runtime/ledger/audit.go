package ledger

import (
	"context"
	"errors"
	"fmt"
)

// Books is the ledger as its rows say it is.
type Books struct {
	// Teams is how many teams were checked.
	Teams int
	// Reserved counts the rows still reserved; Settled and Cancelled the
	// rows that ended so.
	Reserved, Settled, Cancelled int
	// CompletionTokens is the settled rows' completion tokens.
	CompletionTokens int64
}

// Audit recomputes every team's figures from the ledger's rows and returns
// the books, with an error naming each team whose balance is not its
// credits less its settled costs, whose reserved amount is not the sum of
// its open reservations, or that has an unsettled row carrying a cost.
func (l *Ledger) Audit(ctx context.Context) (Books, error) {
	var b Books
	rows, err := l.db.QueryContext(ctx, `SELECT t.id, t.balance_microcredits, t.reserved_microcredits,
		(SELECT COALESCE(CAST(SUM(c.amount_microcredits) AS BIGINT), 0) FROM credit_entries c WHERE c.team_id = t.id),
		(SELECT COALESCE(CAST(SUM(u.cost_microcredits) AS BIGINT), 0) FROM usage_ledger u WHERE u.team_id = t.id AND u.status = 'settled'),
		(SELECT COALESCE(CAST(SUM(u.reserved_microcredits) AS BIGINT), 0) FROM usage_ledger u WHERE u.team_id = t.id AND u.status = 'reserved'),
		(SELECT COUNT(*) FROM usage_ledger u WHERE u.team_id = t.id AND u.status <> 'settled' AND u.cost_microcredits <> 0)
		FROM teams t ORDER BY t.id`)
	if err != nil {
		return b, fmt.Errorf("audit: read teams: %w", err)
	}
	defer rows.Close()
	var errs []error
	for rows.Next() {
		var id, balance, reserved, credits, costs, open, stray int64
		if err := rows.Scan(&id, &balance, &reserved, &credits, &costs, &open, &stray); err != nil {
			return b, fmt.Errorf("audit: read teams: %w", err)
		}
		b.Teams++
		if balance != credits-costs {
			errs = append(errs, fmt.Errorf("team %d: balance %d, want credits %d − settled costs %d = %d", id, balance, credits, costs, credits-costs))
		}
		if reserved != open {
			errs = append(errs, fmt.Errorf("team %d: reserved %d, want the open reservations' %d", id, reserved, open))
		}
		if stray != 0 {
			errs = append(errs, fmt.Errorf("team %d: %d unsettled rows carry a cost", id, stray))
		}
	}
	if err := rows.Err(); err != nil {
		return b, fmt.Errorf("audit: read teams: %w", err)
	}
	err = l.db.QueryRowContext(ctx, `SELECT
		COALESCE(SUM(CASE WHEN status = 'reserved' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN status = 'settled' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN status = 'cancelled' THEN 1 ELSE 0 END), 0),
		COALESCE(CAST(SUM(CASE WHEN status = 'settled' THEN completion_tokens ELSE 0 END) AS BIGINT), 0)
		FROM usage_ledger`).Scan(&b.Reserved, &b.Settled, &b.Cancelled, &b.CompletionTokens)
	if err != nil {
		return b, fmt.Errorf("audit: count rows: %w", err)
	}
	return b, errors.Join(errs...)
}
