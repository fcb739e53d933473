package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/llmplat/llmplat/runtime/store"
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
//
// The whole UTC days of the range are read from the usage_daily rollup
// (migration 0006), a partial day at either end from the rollup or, when
// the range cuts that day's settled rows, from the ledger rows themselves:
// the answer is the GROUP BY over the ledger rows, exactly, while reading
// one row per day and model plus at most two partial days' rows.
func (l *Ledger) Usage(ctx context.Context, teamID int64, from, to time.Time) ([]ModelUsage, error) {
	var out []ModelUsage
	err := l.readUsage(ctx, teamID, from, to, false, func(_ string, u ModelUsage) {
		out = append(out, u)
	})
	if err != nil {
		return nil, fmt.Errorf("usage of team %d: %w", teamID, err)
	}
	return out, nil
}

// DayUsage is a team's settled usage of one model on one UTC day.
type DayUsage struct {
	// Day is midnight UTC of the day the requests were created on.
	Day time.Time
	ModelUsage
}

// UsageByDay returns what Usage returns, per UTC day of the requests'
// creation: for each day and model with settled usage in [from, to), in
// order of day and then model. A partial day at either end counts only the
// part inside the range. Summing a model's days gives Usage's row for it.
func (l *Ledger) UsageByDay(ctx context.Context, teamID int64, from, to time.Time) ([]DayUsage, error) {
	var out []DayUsage
	var perr error
	err := l.readUsage(ctx, teamID, from, to, true, func(day string, u ModelUsage) {
		d, err := time.Parse(time.DateOnly, day)
		if err != nil && perr == nil {
			perr = fmt.Errorf("day %q: %w", day, err)
		}
		out = append(out, DayUsage{Day: d, ModelUsage: u})
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		return nil, fmt.Errorf("usage by day of team %d: %w", teamID, err)
	}
	return out, nil
}

// readUsage runs the usage query over [from, to), grouped by model and, if
// byDay, by UTC day first, and hands each row to emit (day is "" unless
// byDay). The whole days of the range are read from usage_daily. A partial
// day at either end (or the one day a short range is inside) is read from
// the rollup too when none of that day's settled rows lies outside the
// range — the usual case of a range ending now — and otherwise from the
// ledger rows of the part inside the range, by the (team_id, created_at)
// index: at most two days' rows. One statement reads it all, so the parts
// are of one snapshot, and the rollup moves in the transaction that settles.
func (l *Ledger) readUsage(ctx context.Context, teamID int64, from, to time.Time, byDay bool, emit func(day string, u ModelUsage)) error {
	return l.readUsageBy(ctx, teamID, from, to, byDay, false, func(day string, _ int64, u ModelUsage) { emit(day, u) })
}

// readUsageBy is readUsage, grouped by API key too (after the day, before
// the model) when byKey; keyID is 0 otherwise, and for rows without a key.
func (l *Ledger) readUsageBy(ctx context.Context, teamID int64, from, to time.Time, byDay, byKey bool,
	emit func(day string, keyID int64, u ModelUsage)) error {
	from, to = ceilMicro(from), ceilMicro(to)
	if !from.Before(to) {
		return nil
	}
	d := l.db.Dialect()
	sum := d.SaturatingSum
	// The rollup's day is the UTC date as text on both dialects.
	dayOfRow := "substr(created_at, 1, 10)"
	if d == store.Postgres {
		dayOfRow = "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
	}
	args := []any{teamID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	const rollupCols = "day AS d, key_id AS k, model, requests AS n, prompt_tokens AS pt, completion_tokens AS ct, cost_microcredits AS cost"
	ledgerCols := dayOfRow + " AS d, COALESCE(key_id, 0) AS k, model, 1 AS n, prompt_tokens AS pt, completion_tokens AS ct, cost_microcredits AS cost"
	var parts []string
	// edge reads [a, b), a part of the day starting at start.
	edge := func(start, a, b time.Time) {
		// outside: the day has settled rows the range leaves out. Each
		// non-empty side is its own probe of the (team_id, created_at)
		// index; as one OR the planner may scan the team's rows instead.
		var probes []string
		for _, side := range [][2]time.Time{{start, a}, {b, start.Add(day)}} {
			if side[0].Before(side[1]) {
				probes = append(probes, `EXISTS (SELECT 1 FROM usage_ledger o WHERE o.team_id = $1 AND o.status = 'settled'
					AND o.created_at >= `+arg(side[0])+` AND o.created_at < `+arg(side[1])+`)`)
			}
		}
		outside := "(" + strings.Join(append(probes, "FALSE"), " OR ") + ")"
		parts = append(parts,
			`SELECT `+rollupCols+` FROM usage_daily WHERE team_id = $1 AND day = `+arg(start.Format(time.DateOnly))+` AND NOT `+outside,
			`SELECT `+ledgerCols+` FROM usage_ledger WHERE team_id = $1 AND status = 'settled'
				AND created_at >= `+arg(a)+` AND created_at < `+arg(b)+` AND `+outside)
	}
	first := from.Truncate(day)
	if first.Before(from) {
		first = first.Add(day)
	}
	last := to.Truncate(day)
	if !last.Before(first) {
		if first.Before(last) {
			parts = append(parts, `SELECT `+rollupCols+` FROM usage_daily WHERE team_id = $1
				AND day >= `+arg(first.Format(time.DateOnly))+` AND day < `+arg(last.Format(time.DateOnly)))
		}
		if from.Before(first) {
			edge(from.Truncate(day), from, first)
		}
		if last.Before(to) {
			edge(last, last, to)
		}
	} else {
		edge(from.Truncate(day), from, to) // inside one day
	}
	group, key := "model", "'' AS d, 0 AS k, model"
	switch {
	case byDay && byKey:
		group, key = "d, k, model", "d, k, model"
	case byDay:
		group, key = "d, model", "d, 0 AS k, model"
	case byKey:
		group, key = "k, model", "'' AS d, k, model"
	}
	q := `SELECT ` + key + `, ` + sum("n") + `, ` + sum("pt") + `, ` + sum("ct") + `, ` + sum("cost") + ` FROM (
		` + strings.Join(parts, "\n\t\tUNION ALL\n\t\t") + `
	) x GROUP BY ` + group + ` HAVING SUM(n) > 0 ORDER BY ` + group
	rows, err := l.db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var dd string
		var k int64
		var u ModelUsage
		if err := rows.Scan(&dd, &k, &u.Model, &u.Requests, &u.PromptTokens, &u.CompletionTokens, &u.CostMicrocredits); err != nil {
			return err
		}
		emit(dd, k, u)
	}
	return rows.Err()
}

// KeyUsage is a team's settled usage of one model through one API key.
type KeyUsage struct {
	// KeyID is the API key's id; 0 for requests without a key (a JWT's).
	KeyID int64
	ModelUsage
}

// UsageByKey returns what Usage returns, per API key and then model: which
// service spent it. It reads the same rollup (usage_daily is keyed by key
// too, migration 0009) with the same exactness at partial days; summing a
// model's keys gives Usage's row for it.
func (l *Ledger) UsageByKey(ctx context.Context, teamID int64, from, to time.Time) ([]KeyUsage, error) {
	var out []KeyUsage
	err := l.readUsageBy(ctx, teamID, from, to, false, true, func(_ string, k int64, u ModelUsage) {
		out = append(out, KeyUsage{KeyID: k, ModelUsage: u})
	})
	if err != nil {
		return nil, fmt.Errorf("usage by key of team %d: %w", teamID, err)
	}
	return out, nil
}

// day is a UTC day, the rollup's grain.
const day = 24 * time.Hour

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
