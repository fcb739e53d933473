package ledger

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// usagePageRows is the scale: one team's settled requests this
// month.
const usagePageRows = 1_000_000

// BenchmarkUsagePage measures a usage page view of a team with 1,000,000
// settled rows this month on PostgreSQL, the rows spread evenly from the
// month's start to now:
//
//   - page: the console's usage page, Usage and UsageByDay over the month
//     to the end of today (whole days: the rollup only);
//   - now: Usage over the month to now, as the platform page asks (today is
//     a partial day the range cuts no row of: still the rollup);
//   - cut: Usage over the month to the middle of the rows of the last day,
//     which reads that day's part from the ledger rows (the worst case);
//   - direct: the GROUP BY over the ledger rows that Usage was before the
//     rollup, for comparison;
//   - keys: the per-key usage page, UsageByKey over the month to the end of
//     today (the rows are spread over three keys);
//   - latency: the latency page, TeamLatency per model and per key and
//     model over the month (every row is timed: the month's hours of the
//     latency_hourly rollup);
//   - platform: the platform's SLI page, PlatformLatency over the last hour
//     and the last day.
func BenchmarkUsagePage(b *testing.B) {
	ctx := context.Background()
	f := newFixture(b, testenv.Postgres(b))
	team := f.team(b, "big", 0)
	keys := []int64{f.apiKey(b, team, "svc-a"), f.apiKey(b, team, "svc-b"), f.apiKey(b, team, "svc-c")}
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	// One statement: the rollup's insert trigger folds it in one grouped
	// upsert.
	start := time.Now()
	_, err := f.db.ExecContext(ctx, `INSERT INTO usage_ledger (request_id, team_id, key_id, model, prompt_tokens,
		completion_tokens, reserved_microcredits, cost_microcredits, status, settled_from, created_at, settled_at,
		ttft_ms, generation_ms, queue_ms)
		SELECT 'page-' || i, $1, ($7::bigint[])[1 + i % 3], CASE WHEN i % 3 = 0 THEN $2 ELSE $3 END, 1000 + i % 7, 200 + i % 11, 900, 300 + i % 13,
			'settled', 'exact', c, c, 40 + i % 1900, 500 + i % 9000, i % 250
		FROM generate_series(1, $4::bigint) AS i,
			LATERAL (SELECT $5::timestamptz + ($6::timestamptz - $5::timestamptz) * (i::float8 / $4::bigint)) AS t(c)`,
		team, m70b, m8b, usagePageRows, month, now, keys)
	if err != nil {
		b.Fatalf("insert %d rows: %v", usagePageRows, err)
	}
	if _, err := f.db.ExecContext(ctx, "ANALYZE usage_ledger; ANALYZE usage_daily; ANALYZE latency_hourly"); err != nil {
		b.Fatal(err)
	}
	b.Logf("inserted %d rows (from %s to %s) and folded them into the rollup in %v", usagePageRows,
		month.Format(time.RFC3339), now.Format(time.RFC3339), time.Since(start).Round(time.Millisecond))
	endOfToday := now.Truncate(day).Add(day)
	usage := func(b *testing.B, to time.Time) []ModelUsage {
		u, err := f.l.Usage(ctx, team, month, to)
		if err != nil {
			b.Fatal(err)
		}
		return u
	}
	want := directUsage(b, f, team, month, endOfToday)
	if got := usage(b, endOfToday); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		b.Fatalf("Usage = %+v, the ledger says %+v", got, want)
	}
	b.Run("page", func(b *testing.B) {
		for b.Loop() {
			usage(b, endOfToday)
			if _, err := f.l.UsageByDay(ctx, team, month, endOfToday); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("now", func(b *testing.B) {
		for b.Loop() {
			usage(b, now.Add(time.Second))
		}
	})
	lastDay := now.Truncate(day)
	if lastDay.Equal(month) {
		lastDay = month // the first of the month: the cut is inside the only day
	}
	cut := lastDay.Add(now.Sub(lastDay) / 2)
	b.Run("cut", func(b *testing.B) {
		for b.Loop() {
			usage(b, cut)
		}
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			directUsage(b, f, team, month, endOfToday)
		}
	})
	if got, want := mustKeys(b, f, team, month, endOfToday), directByKey(b, f, team, month, endOfToday); !slices.Equal(got, want) {
		b.Fatalf("UsageByKey = %+v, the ledger says %+v", got, want)
	}
	b.Run("keys", func(b *testing.B) {
		for b.Loop() {
			mustKeys(b, f, team, month, endOfToday)
		}
	})
	b.Run("latency", func(b *testing.B) {
		for b.Loop() {
			for _, g := range []LatencyGroup{ByModel, ByKeyAndModel} {
				if _, err := f.l.TeamLatency(ctx, team, month, endOfToday, g); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("platform", func(b *testing.B) {
		for b.Loop() {
			for _, since := range []time.Duration{time.Hour, day} {
				if _, err := f.l.PlatformLatency(ctx, now.Add(-since), now); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// mustKeys is UsageByKey, failing b on an error.
func mustKeys(b *testing.B, f *fixture, team int64, from, to time.Time) []KeyUsage {
	u, err := f.l.UsageByKey(context.Background(), team, from, to)
	if err != nil {
		b.Fatal(err)
	}
	return u
}
