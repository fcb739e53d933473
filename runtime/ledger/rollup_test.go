package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// directUsage is the usage query as it was before the rollup: the GROUP BY
// over the ledger rows of [from, to). It is the oracle the rollup-backed
// answers must equal.
func directUsage(tb testing.TB, f *fixture, team int64, from, to time.Time) []ModelUsage {
	tb.Helper()
	sum := f.db.Dialect().SaturatingSum
	rows, err := f.db.QueryContext(context.Background(), `SELECT model, COUNT(*),
		`+sum("prompt_tokens")+`, `+sum("completion_tokens")+`, `+sum("cost_microcredits")+`
		FROM usage_ledger
		WHERE team_id = $1 AND status = 'settled' AND created_at >= $2 AND created_at < $3
		GROUP BY model ORDER BY model`, team, ceilMicro(from), ceilMicro(to))
	if err != nil {
		tb.Fatalf("direct usage: %v", err)
	}
	defer rows.Close()
	var out []ModelUsage
	for rows.Next() {
		var u ModelUsage
		if err := rows.Scan(&u.Model, &u.Requests, &u.PromptTokens, &u.CompletionTokens, &u.CostMicrocredits); err != nil {
			tb.Fatal(err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// directByDay is directUsage over each UTC day of [from, to) in turn (the
// range's ends cut the first and last day).
func directByDay(tb testing.TB, f *fixture, team int64, from, to time.Time) []DayUsage {
	tb.Helper()
	var out []DayUsage
	for d := from.UTC().Truncate(day); d.Before(to); d = d.Add(day) {
		lo, hi := d, d.Add(day)
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		if !lo.Before(hi) {
			continue
		}
		for _, u := range directUsage(tb, f, team, lo, hi) {
			out = append(out, DayUsage{Day: d, ModelUsage: u})
		}
	}
	return out
}

// TestRollupEqualsDirectQuery is the differential test of the usage_daily
// rollup: rows reserved over several days at random instants, settled
// (through the batched and the precise path), cancelled or settled late by
// concurrent workers, plus settled rows inserted directly and rows deleted;
// then, for random ranges with whole and partial days at either end,
// Usage and UsageByDay must equal the GROUP BY over the ledger rows.
func TestRollupEqualsDirectQuery(t *testing.T) {
	const (
		rowsPerTeam = 150 // enough rows for several per day and model
		spanDays    = 5   // the days the rows are created over
		workers     = 6   // concurrent settlers
		ranges      = 60  // random ranges compared per team
	)
	forEachDialect(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(7, uint64(len(t.Name()))))
		precise := f.ledger(t, Config{NoBatching: true})
		teams := []int64{f.team(t, "a", 1_000_000_000), f.team(t, "b", 1_000_000_000)}
		start := startTime.Truncate(day)
		f.clock.Step(start.Sub(f.clock.Now()))
		var ids []string
		for i := range rowsPerTeam * len(teams) {
			// The rows are created in time order; each step crosses
			// a day boundary now and then.
			f.clock.Step(time.Duration(rng.Int64N(int64(spanDays*day)/int64(rowsPerTeam*len(teams))*2)) + time.Duration(rng.IntN(1000)))
			id := fmt.Sprintf("r%d", i)
			model := []string{m8b, m70b}[rng.IntN(2)]
			f.reserve(t, Reservation{RequestID: id, TeamID: teams[i%len(teams)], Model: model, PromptTokens: 1000, MaxOutputTokens: 500})
			ids = append(ids, id)
		}
		end := f.clock.Now().Add(time.Hour)
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		var wg sync.WaitGroup
		errs := make(chan error, len(ids))
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(ids); i += workers {
					var err error
					u := Usage{PromptTokens: int64(i % 1000), CompletionTokens: int64(i % 500)}
					switch i % 5 {
					case 0:
						_, err = f.l.Cancel(ctx, ids[i])
					case 1:
						_, err = precise.Settle(ctx, ids[i], u, SourceExact)
					case 2:
						_, err = f.l.Settle(ctx, ids[i], u, SourcePartial)
					case 3:
						continue // settled late, below
					default:
						_, err = f.l.Settle(ctx, ids[i], u, SourceNodeLog)
					}
					if err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		// Late settles: the clock has moved on (days, for some), the
		// rows keep the day they were created on.
		f.clock.Step(2 * day)
		for i := 3; i < len(ids); i += 5 {
			if _, err := f.l.Settle(ctx, ids[i], Usage{PromptTokens: 10, CompletionTokens: int64(i)}, SourceExact); err != nil {
				t.Fatal(err)
			}
		}
		f.checkBooks(t)
		// Rows that arrive settled, several per statement, and rows
		// taken away again (by hand: the books no longer balance).
		if _, err := f.db.ExecContext(ctx, `INSERT INTO usage_ledger (request_id, team_id, model, prompt_tokens,
			completion_tokens, reserved_microcredits, cost_microcredits, status, settled_from, created_at, settled_at)
			VALUES ('ins-1', $1, $2, 5, 6, 7, 7, 'settled', 'exact', $3, $3), ('ins-2', $1, $2, 8, 9, 10, 10, 'settled', 'exact', $4, $4),
			       ('ins-3', $1, $2, 1, 1, 1, 0, 'reserved', NULL, $4, NULL)`,
			teams[0], m8b, start.Add(day+time.Microsecond), start.Add(3*day-time.Microsecond)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.db.ExecContext(ctx, `DELETE FROM usage_ledger WHERE request_id IN ('r4', 'r9', 'ins-2')`); err != nil {
			t.Fatal(err)
		}
		check := func(team int64, from, to time.Time) {
			t.Helper()
			want := directUsage(t, f, team, from, to)
			got, err := f.l.Usage(ctx, team, from, to)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("Usage(%d, %v, %v) = %+v, %v; the ledger's GROUP BY says %+v", team, from, to, got, err, want)
			}
			wantDays := directByDay(t, f, team, from, to)
			gotDays, err := f.l.UsageByDay(ctx, team, from, to)
			if err != nil || !slices.Equal(gotDays, wantDays) {
				t.Fatalf("UsageByDay(%d, %v, %v) = %+v, %v; per day the ledger says %+v", team, from, to, gotDays, err, wantDays)
			}
		}
		for _, team := range teams {
			check(team, start, end)                                         // everything, whole days from the start
			check(team, start.Add(-day), start.Add(10*day))                 // whole days only
			check(team, start.Add(day), start.Add(day))                     // empty
			check(team, start.Add(time.Hour), start.Add(2*time.Hour))       // inside one day
			check(team, start.Add(day-time.Hour), start.Add(day+time.Hour)) // two partial days
			check(team, start.Add(time.Hour), end.Add(2*day))               // to past the last row
			for range ranges {
				span := end.Sub(start)
				a := start.Add(time.Duration(rng.Int64N(int64(span))))
				b := start.Add(time.Duration(rng.Int64N(int64(span))))
				if rng.IntN(3) == 0 {
					a = a.Truncate(day) // whole days at one end
				}
				if b.Before(a) {
					a, b = b, a
				}
				check(team, a, b)
			}
		}
		var sums int
		if err := f.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM usage_daily").Scan(&sums); err != nil || sums == 0 {
			t.Fatalf("usage_daily has %d rows (%v): the whole days were not read from it", sums, err)
		}
	})
}
