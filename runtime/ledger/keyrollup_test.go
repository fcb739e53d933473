package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
)

// directByKey is UsageByKey's oracle: the GROUP BY key and model over the
// ledger rows of [from, to).
func directByKey(tb testing.TB, f *fixture, team int64, from, to time.Time) []KeyUsage {
	tb.Helper()
	sum := f.db.Dialect().SaturatingSum
	rows, err := f.db.QueryContext(context.Background(), `SELECT COALESCE(key_id, 0), model, COUNT(*),
		`+sum("prompt_tokens")+`, `+sum("completion_tokens")+`, `+sum("cost_microcredits")+`
		FROM usage_ledger
		WHERE team_id = $1 AND status = 'settled' AND created_at >= $2 AND created_at < $3
		GROUP BY COALESCE(key_id, 0), model ORDER BY 1, 2`, team, ceilMicro(from), ceilMicro(to))
	if err != nil {
		tb.Fatalf("direct usage by key: %v", err)
	}
	defer rows.Close()
	var out []KeyUsage
	for rows.Next() {
		var u KeyUsage
		if err := rows.Scan(&u.KeyID, &u.Model, &u.Requests, &u.PromptTokens, &u.CompletionTokens, &u.CostMicrocredits); err != nil {
			tb.Fatal(err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// directLatency is the latency queries' oracle: the settled ledger rows
// of the whole hours covering [from, to) (of team, or of every team when
// team is 0), bucketed in Go by bucketOf and grouped by g.
func directLatency(tb testing.TB, f *fixture, team int64, from, to time.Time, g LatencyGroup) []Latency {
	tb.Helper()
	lo, hi := hourRange(from, to)
	rows, err := f.db.QueryContext(context.Background(), `SELECT team_id, COALESCE(key_id, 0), model, completion_tokens,
		ttft_ms, generation_ms, queue_ms, created_at FROM usage_ledger WHERE status = 'settled'`)
	if err != nil {
		tb.Fatalf("direct latency: %v", err)
	}
	defer rows.Close()
	type group struct {
		model string
		key   int64
	}
	by := map[group]*Latency{}
	for rows.Next() {
		var tm, key, ct int64
		var model string
		var ttft, gen, queue *int64
		var created time.Time
		if err := rows.Scan(&tm, &key, &model, &ct, &ttft, &gen, &queue, &created); err != nil {
			tb.Fatal(err)
		}
		if h := created.UTC().Format(hourFormat); (team != 0 && tm != team) || h < lo || h >= hi {
			continue
		}
		if g == ByModel {
			key = 0
		}
		l := by[group{model, key}]
		if l == nil {
			l = &Latency{Model: model, KeyID: key}
			by[group{model, key}] = l
		}
		l.Requests++
		if ttft != nil {
			l.Timed++
			l.CompletionTokens += ct
			l.Generation += time.Duration(*gen) * time.Millisecond
			l.TTFT[bucketOf(*ttft)]++
			l.QueueWait[bucketOf(*queue)]++
		}
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	var out []Latency
	for _, l := range by {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Model != out[j].Model {
			return out[i].Model < out[j].Model
		}
		return out[i].KeyID < out[j].KeyID
	})
	return out
}

// apiKey inserts an API key of team and returns its id.
func (f *fixture) apiKey(tb testing.TB, team int64, name string) int64 {
	tb.Helper()
	var id int64
	err := f.db.QueryRowContext(context.Background(), `INSERT INTO api_keys (team_id, name, prefix, hash)
		VALUES ($1, $2, $2, $3) RETURNING id`, team, name, []byte("hash-"+name)).Scan(&id)
	if err != nil {
		tb.Fatalf("insert key %s: %v", name, err)
	}
	return id
}

// boundaryMillis are latencies on and beside every bucket bound, so that a
// bucket the migration's SQL assigns differently from bucketOf shows.
func boundaryMillis() []int64 {
	out := []int64{0, 1}
	for _, b := range LatencyBounds {
		out = append(out, b-1, b, b+1)
	}
	return append(out, 120_000)
}

// TestRollupByKeyAndLatencyEqualDirectQuery is the differential test of
// migration 0009: rows of two teams, through several keys and none (a
// JWT), reserved over several days, settled timed and untimed through the
// batched and the precise path (latencies on every bucket bound), cancelled,
// settled late, inserted settled and deleted; then for random ranges
// UsageByKey must equal the GROUP BY over the ledger rows, and the latency
// queries the ledger rows bucketed in Go. Equal histograms also show that
// the migration's bucket bounds are LatencyBounds.
func TestRollupByKeyAndLatencyEqualDirectQuery(t *testing.T) {
	const (
		rowsPerTeam = 120
		spanDays    = 3
		workers     = 4
		ranges      = 40
	)
	forEachDialect(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(11, uint64(len(t.Name()))))
		precise := f.ledger(t, Config{NoBatching: true})
		teams := []int64{f.team(t, "a", 1_000_000_000), f.team(t, "b", 1_000_000_000)}
		keys := map[int64][]int64{
			teams[0]: {0, f.apiKey(t, teams[0], "a-svc1"), f.apiKey(t, teams[0], "a-svc2")},
			teams[1]: {f.apiKey(t, teams[1], "b-svc")},
		}
		start := startTime.Truncate(day)
		f.clock.Step(start.Sub(f.clock.Now()))
		var ids []string
		for i := range rowsPerTeam * len(teams) {
			f.clock.Step(time.Duration(rng.Int64N(int64(spanDays*day)/int64(rowsPerTeam*len(teams))*2)) + time.Duration(rng.IntN(1000)))
			id := fmt.Sprintf("r%d", i)
			team := teams[i%len(teams)]
			ks := keys[team]
			f.reserve(t, Reservation{RequestID: id, TeamID: team, KeyID: ks[rng.IntN(len(ks))],
				Model: []string{m8b, m70b}[rng.IntN(2)], PromptTokens: 1000, MaxOutputTokens: 500})
			ids = append(ids, id)
		}
		end := f.clock.Now().Add(time.Hour)
		bounds := boundaryMillis()
		timing := func(i int) Timing {
			ms := func(j int) time.Duration { return time.Duration(bounds[(i+j)%len(bounds)]) * time.Millisecond }
			return Timing{FirstToken: ms(0), Generation: ms(3) + time.Duration(i)*time.Millisecond, QueueWait: ms(7)}
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(ids))
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(ids); i += workers {
					var err error
					u := Usage{PromptTokens: int64(i % 1000), CompletionTokens: int64(i%500) + 1}
					switch i % 6 {
					case 0:
						_, err = f.l.Cancel(ctx, ids[i])
					case 1:
						_, err = precise.SettleTimed(ctx, ids[i], u, SourceExact, timing(i))
					case 2:
						_, err = f.l.SettleTimed(ctx, ids[i], u, SourcePartial, timing(i))
					case 3:
						continue // settled late, below
					case 4:
						_, err = f.l.Settle(ctx, ids[i], u, SourceNodeLog) // untimed
					default:
						_, err = f.l.SettleTimed(ctx, ids[i], u, SourceExact, timing(i))
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
		f.clock.Step(2 * day)
		for i := 3; i < len(ids); i += 6 {
			if _, err := precise.SettleTimed(ctx, ids[i], Usage{PromptTokens: 10, CompletionTokens: int64(i)}, SourceExact, timing(i)); err != nil {
				t.Fatal(err)
			}
		}
		f.checkBooks(t)
		if _, err := f.db.ExecContext(ctx, `INSERT INTO usage_ledger (request_id, team_id, key_id, model, prompt_tokens,
			completion_tokens, reserved_microcredits, cost_microcredits, status, settled_from, created_at, settled_at,
			ttft_ms, generation_ms, queue_ms)
			VALUES ('ins-1', $1, $2, $3, 5, 6, 7, 7, 'settled', 'exact', $4, $4, 250, 900, 0),
			       ('ins-2', $1, NULL, $3, 8, 9, 10, 10, 'settled', 'exact', $5, $5, NULL, NULL, NULL),
			       ('ins-3', $1, $2, $3, 8, 9, 10, 10, 'settled', 'exact', $5, $5, 30000, 10, 9)`,
			teams[0], keys[teams[0]][1], m8b, start.Add(day+time.Microsecond), start.Add(2*day-time.Microsecond)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.db.ExecContext(ctx, `DELETE FROM usage_ledger WHERE request_id IN ('r1', 'r5', 'r8', 'ins-3')`); err != nil {
			t.Fatal(err)
		}
		check := func(team int64, from, to time.Time) {
			t.Helper()
			want := directByKey(t, f, team, from, to)
			got, err := f.l.UsageByKey(ctx, team, from, to)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("UsageByKey(%d, %v, %v) = %+v, %v; the ledger's GROUP BY says %+v", team, from, to, got, err, want)
			}
			wantUsage := directUsage(t, f, team, from, to)
			gotUsage, err := f.l.Usage(ctx, team, from, to)
			if err != nil || !slices.Equal(gotUsage, wantUsage) {
				t.Fatalf("Usage(%d, %v, %v) = %+v, %v; the ledger's GROUP BY says %+v", team, from, to, gotUsage, err, wantUsage)
			}
			for _, g := range []LatencyGroup{ByModel, ByKeyAndModel} {
				wantLat := directLatency(t, f, team, from, to, g)
				gotLat, err := f.l.TeamLatency(ctx, team, from, to, g)
				if err != nil || !slices.Equal(gotLat, wantLat) {
					t.Fatalf("TeamLatency(%d, %v, %v, %d) = %+v, %v; the ledger's rows say %+v", team, from, to, g, gotLat, err, wantLat)
				}
			}
		}
		for _, team := range teams {
			check(team, start, end)
			check(team, start.Add(-day), start.Add(10*day))
			check(team, start.Add(day), start.Add(day))
			check(team, start.Add(time.Hour), start.Add(2*time.Hour))
			check(team, start.Add(day-time.Hour), start.Add(day+90*time.Minute))
			for range ranges {
				span := end.Sub(start)
				a := start.Add(time.Duration(rng.Int64N(int64(span))))
				b := start.Add(time.Duration(rng.Int64N(int64(span))))
				if b.Before(a) {
					a, b = b, a
				}
				check(team, a, b)
			}
		}
		for _, r := range [][2]time.Time{{start, end}, {start.Add(5 * time.Hour), start.Add(7 * time.Hour)}} {
			want := directLatency(t, f, 0, r[0], r[1], ByModel)
			got, err := f.l.PlatformLatency(ctx, r[0], r[1])
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("PlatformLatency(%v, %v) = %+v, %v; the ledger's rows say %+v", r[0], r[1], got, err, want)
			}
		}
		all, err := f.l.PlatformLatency(ctx, start, end)
		if err != nil {
			t.Fatal(err)
		}
		var timed int64
		for _, l := range all {
			timed += l.Timed
		}
		if timed == 0 {
			t.Fatal("no timed request in the rollup: the test checked nothing")
		}
	})
}

// TestHistogramQuantile checks the percentile estimate: inside the bucket
// of the true value, interpolated, and "at least 30 s" in the open bucket.
func TestHistogramQuantile(t *testing.T) {
	hist := func(ms ...int64) Histogram {
		var h Histogram
		for _, m := range ms {
			h[bucketOf(m)]++
		}
		return h
	}
	tests := []struct {
		name string
		h    Histogram
		q    float64
		want time.Duration
		ok   bool
	}{
		{"empty", Histogram{}, 0.5, 0, false},
		{"one value in [100, 200)", hist(150), 0.5, 200 * time.Millisecond, true},
		{"median of four in one bucket", hist(110, 120, 130, 140), 0.5, 150 * time.Millisecond, true},
		{"p95 of 19 fast and 1 slow", hist(append(slices.Repeat([]int64{5}, 19), 4000)...), 0.95, 10 * time.Millisecond, true},
		{"p100 in the open bucket", hist(5, 60_000), 1, 30 * time.Second, true},
		{"zero quantile", hist(5), 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.h.Quantile(tt.q)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Quantile(%v) = %v, %v; want %v, %v", tt.q, got, ok, tt.want, tt.ok)
			}
		})
	}
}
