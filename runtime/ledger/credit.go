package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// maxCreditAmount bounds one credit entry (a billion credits): far above
// any real grant. It does not bound a run of grants: about 9,200 of them
// would pass int64, so a credit must also leave the balance within
// ±MaxBalance, which AddCredit checks in the same statement.
const maxCreditAmount = 1_000_000_000 * 1_000_000

// MaxBalance bounds a team's balance either way, in micro-credits (a
// trillion credits): no balance plus one credit entry can leave int64, so
// neither PostgreSQL's bigint nor SQLite's integer overflows (SQLite would
// silently turn the balance into a float).
const MaxBalance = 1_000_000_000_000 * 1_000_000

// Credit is one credit entry: a grant (positive) or a correction
// (negative) of a team's balance, in micro-credits.
type Credit struct {
	ID, TeamID, Amount   int64
	IdempotencyKey, Note string
	CreatedAt            time.Time
	// Applied is true only for the call that inserted the entry and moved
	// the balance; a retry gets false and the entry as first recorded.
	Applied bool
}

// AddCredit records a credit entry and adds amountMicro to the team's
// balance, in one transaction. A negative amount is a correction: it is
// allowed and may take the balance below zero. The idempotency key makes a
// retry a no-op that returns the first entry with Applied false; a key
// reused for another team or amount returns that entry and
// ErrIdempotencyConflict, and changes nothing.
func (l *Ledger) AddCredit(ctx context.Context, teamID int64, idempotencyKey string, amountMicro int64, note string) (Credit, error) {
	switch {
	case idempotencyKey == "", amountMicro == 0, amountMicro > maxCreditAmount, amountMicro < -maxCreditAmount:
		return Credit{}, fmt.Errorf("add credit %q of %d: %w", idempotencyKey, amountMicro, ErrInvalidInput)
	case teamID <= 0:
		return Credit{}, fmt.Errorf("add credit %q: team %d: %w", idempotencyKey, teamID, ErrUnknownTeam)
	}
	var out Credit
	err := l.db.InTx(ctx, func(tx *sql.Tx) error {
		c, found, err := lookupCredit(ctx, tx, idempotencyKey)
		if err != nil || found {
			out = c
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE teams SET balance_microcredits = balance_microcredits + $2
			WHERE id = $1 AND balance_microcredits + $2 BETWEEN $3 AND $4`, teamID, amountMicro, int64(-MaxBalance), int64(MaxBalance))
		if err != nil {
			return fmt.Errorf("credit team: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("credit team: %w", err)
		} else if n == 0 {
			return missingOrOutOfRange(ctx, tx, teamID, amountMicro)
		}
		out = Credit{TeamID: teamID, Amount: amountMicro, IdempotencyKey: idempotencyKey, Note: note,
			CreatedAt: l.now(), Applied: true}
		err = tx.QueryRowContext(ctx, `INSERT INTO credit_entries
			(team_id, idempotency_key, amount_microcredits, note, created_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (idempotency_key) DO NOTHING RETURNING id`,
			teamID, idempotencyKey, amountMicro, note, out.CreatedAt).Scan(&out.ID)
		if errors.Is(err, sql.ErrNoRows) {
			return errRollback // a concurrent call with this key committed first
		}
		if err != nil {
			return fmt.Errorf("insert credit entry: %w", err)
		}
		return nil
	})
	if errors.Is(err, errRollback) {
		var found bool
		out, found, err = lookupCredit(ctx, l.db, idempotencyKey)
		if err == nil && !found {
			err = fmt.Errorf("credit entry vanished after a conflict: %w", ErrNotFound)
		}
	}
	if err != nil {
		return Credit{}, fmt.Errorf("add credit %q: %w", idempotencyKey, err)
	}
	if !out.Applied && (out.TeamID != teamID || out.Amount != amountMicro) {
		return out, fmt.Errorf("add credit %q: recorded as %d for team %d, asked %d for team %d: %w",
			idempotencyKey, out.Amount, out.TeamID, amountMicro, teamID, ErrIdempotencyConflict)
	}
	return out, nil
}

// Credit returns the credit entry with id; ErrNotFound when there is none.
func (l *Ledger) Credit(ctx context.Context, id int64) (Credit, error) {
	c, found, err := readCredit(ctx, l.db, "id", id)
	switch {
	case err != nil:
		return Credit{}, fmt.Errorf("credit entry %d: %w", id, err)
	case !found:
		return Credit{}, fmt.Errorf("credit entry %d: %w", id, ErrNotFound)
	}
	return c, nil
}

// lookupCredit returns the credit entry recorded under key, if any.
func lookupCredit(ctx context.Context, q querier, key string) (Credit, bool, error) {
	return readCredit(ctx, q, "idempotency_key", key)
}

// readCredit returns the credit entry whose column (id or
// idempotency_key, both unique) is v, if any.
func readCredit(ctx context.Context, q querier, column string, v any) (Credit, bool, error) {
	var c Credit
	err := q.QueryRowContext(ctx, `SELECT id, team_id, idempotency_key, amount_microcredits, note, created_at
		FROM credit_entries WHERE `+column+` = $1`, v).
		Scan(&c.ID, &c.TeamID, &c.IdempotencyKey, &c.Amount, &c.Note, &c.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Credit{}, false, nil
	}
	if err != nil {
		return Credit{}, false, fmt.Errorf("look up credit entry: %w", err)
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return c, true, nil
}

// missingOrOutOfRange tells why a credit's update matched no row: the team
// does not exist, or the credit would take its balance past ±MaxBalance.
func missingOrOutOfRange(ctx context.Context, tx *sql.Tx, teamID, amountMicro int64) error {
	var balance int64
	err := tx.QueryRowContext(ctx, "SELECT balance_microcredits FROM teams WHERE id = $1", teamID).Scan(&balance)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("team %d: %w", teamID, ErrUnknownTeam)
	case err != nil:
		return fmt.Errorf("credit team: %w", err)
	}
	return fmt.Errorf("team %d: balance %d plus %d passes ±%d: %w", teamID, balance, amountMicro, int64(MaxBalance), ErrBalanceOutOfRange)
}
