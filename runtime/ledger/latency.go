package ledger

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Timing is how a request's answer came, as the gateway saw it. It is
// recorded on the ledger row by the settle (SettleTimed) and rolled up per
// team, UTC hour, model and key (latency_hourly, migration 0009).
type Timing struct {
	// FirstToken is from the request's arrival to the engine's first event
	// (TTFT), queueing included.
	FirstToken time.Duration
	// Generation is from the first event to the answer's end.
	Generation time.Duration
	// QueueWait is the time spent in the model's queue; zero when an
	// engine had room at once.
	QueueWait time.Duration
}

// valid reports whether every duration is non-negative.
func (t *Timing) valid() bool {
	return t.FirstToken >= 0 && t.Generation >= 0 && t.QueueWait >= 0
}

// millis returns the durations in whole milliseconds, the rows' unit.
func (t *Timing) millis() (ttft, gen, queue int64) {
	return t.FirstToken.Milliseconds(), t.Generation.Milliseconds(), t.QueueWait.Milliseconds()
}

// SettleTimed is Settle that also records how the answer came on the row,
// when it settles (a cancel records nothing). The gateway calls it for the
// requests it relayed; a sweep or a replay settles untimed (Settle), and
// such rows count as requests but not in the latency figures.
func (l *Ledger) SettleTimed(ctx context.Context, requestID string, u Usage, src Source, t Timing) (Outcome, error) {
	return l.settle(ctx, requestID, u, src, &t)
}

// LatencyBounds are the upper bounds, in milliseconds, of the latency
// histograms' buckets: bucket i holds values in [LatencyBounds[i-1],
// LatencyBounds[i]) (from 0 for the first), and the last bucket everything
// from 30 s on. Migration 0009 holds the same bounds in its SQL
// (TestLatencyBucketsMatchMigration). They are denser where TTFT usually
// lies; a percentile read from them is off by at most its bucket's width.
var LatencyBounds = [...]int64{10, 25, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 10000, 30000}

// LatencyBuckets is the number of buckets of a Histogram.
const LatencyBuckets = len(LatencyBounds) + 1

// Histogram counts latencies per bucket of LatencyBounds.
type Histogram [LatencyBuckets]int64

// bucketOf is the bucket a latency of ms milliseconds falls in.
func bucketOf(ms int64) int {
	for i, b := range LatencyBounds {
		if ms < b {
			return i
		}
	}
	return LatencyBuckets - 1
}

// Count returns the number of latencies in h.
func (h Histogram) Count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile estimates the q-quantile (0 < q <= 1) of h: it finds the bucket
// holding the rank ceil(q·n) and interpolates linearly inside it, so the
// estimate lies in the same bucket as the true value, off by at most the
// bucket's width. In the last, open bucket it answers the bucket's lower
// bound (30 s): the estimate is then "at least". ok is false when h is
// empty.
func (h Histogram) Quantile(q float64) (d time.Duration, ok bool) {
	n := h.Count()
	if n == 0 || q <= 0 || q > 1 {
		return 0, false
	}
	rank := int64(math.Ceil(q * float64(n)))
	var below int64
	for i, c := range h {
		if below+c < rank {
			below += c
			continue
		}
		lo := int64(0)
		if i > 0 {
			lo = LatencyBounds[i-1]
		}
		if i == LatencyBuckets-1 {
			return time.Duration(lo) * time.Millisecond, true
		}
		frac := float64(rank-below) / float64(c)
		ms := float64(lo) + frac*float64(LatencyBounds[i]-lo)
		return time.Duration(ms * float64(time.Millisecond)), true
	}
	return 0, false // unreachable: rank <= n
}

// Latency is the latency a team (or the platform) experienced on one model,
// or on one model through one key, over a range of hours.
type Latency struct {
	Model string
	// KeyID is the API key (0: requests without one, a JWT's); 0 also when
	// the rows are grouped by model only.
	KeyID int64
	// Requests counts the settled requests; Timed those of them the
	// gateway timed (a sweep or a replay settles untimed).
	Requests, Timed int64
	// CompletionTokens and Generation are the timed requests' output and
	// the time spent generating it.
	CompletionTokens int64
	Generation       time.Duration
	// TTFT and QueueWait are the timed requests' histograms.
	TTFT, QueueWait Histogram
}

// TokensPerSecond is the timed requests' output over their generation
// time: the rate a client saw, weighted by tokens. ok is false without
// generation time.
func (l Latency) TokensPerSecond() (float64, bool) {
	if l.Generation <= 0 {
		return 0, false
	}
	return float64(l.CompletionTokens) / l.Generation.Seconds(), true
}

// LatencyGroup says how Latency rows are grouped.
type LatencyGroup int

// The groupings of the latency queries.
const (
	// ByModel gives one row per model.
	ByModel LatencyGroup = iota
	// ByKeyAndModel gives one row per key and model.
	ByKeyAndModel
)

// hourFormat is latency_hourly's hour, as text on both dialects.
const hourFormat = "2006-01-02 15"

// hourRange returns the first and the end (exclusive) hour, as text, of
// the whole UTC hours that cover [from, to).
func hourRange(from, to time.Time) (string, string) {
	from, to = from.UTC(), to.UTC()
	end := to.Truncate(time.Hour)
	if end.Before(to) {
		end = end.Add(time.Hour)
	}
	return from.Truncate(time.Hour).Format(hourFormat), end.Format(hourFormat)
}

// TeamLatency returns the latency of the team's requests created in the
// whole UTC hours covering [from, to) (a range of whole days is read
// exactly), per model or per key and model, sorted. It reads the
// latency_hourly rollup: at most 24 rows a day per model and key, never
// the ledger rows. teamID must come from the caller's verified credential.
func (l *Ledger) TeamLatency(ctx context.Context, teamID int64, from, to time.Time, g LatencyGroup) ([]Latency, error) {
	out, err := l.readLatency(ctx, &teamID, from, to, g)
	if err != nil {
		return nil, fmt.Errorf("latency of team %d: %w", teamID, err)
	}
	return out, nil
}

// PlatformLatency returns the latency of every team's requests created in
// the whole UTC hours covering [from, to), per model: the platform's SLIs.
func (l *Ledger) PlatformLatency(ctx context.Context, from, to time.Time) ([]Latency, error) {
	out, err := l.readLatency(ctx, nil, from, to, ByModel)
	if err != nil {
		return nil, fmt.Errorf("platform latency: %w", err)
	}
	return out, nil
}

// latencyColumns are latency_hourly's counters, in the order readLatency
// scans them.
var latencyColumns = func() []string {
	cols := []string{"requests", "timed", "timed_completion_tokens", "generation_ms"}
	for _, kind := range []string{"ttft", "queue"} {
		for i := range LatencyBuckets {
			cols = append(cols, fmt.Sprintf("%s_b%02d", kind, i))
		}
	}
	return cols
}()

// readLatency sums latency_hourly over the hours covering [from, to), for
// one team or (team nil) all of them, grouped by g.
func (l *Ledger) readLatency(ctx context.Context, team *int64, from, to time.Time, g LatencyGroup) ([]Latency, error) {
	if !from.Before(to) {
		return nil, nil
	}
	lo, hi := hourRange(from, to)
	sum := l.db.Dialect().SaturatingSum
	sums := make([]string, len(latencyColumns))
	for i, c := range latencyColumns {
		sums[i] = sum(c)
	}
	group := "model"
	key := "0"
	if g == ByKeyAndModel {
		group, key = "model, key_id", "key_id"
	}
	args := []any{lo, hi}
	where := "hour >= $1 AND hour < $2"
	if team != nil {
		args = append(args, *team)
		where += " AND team_id = $" + strconv.Itoa(len(args))
	}
	q := `SELECT model, ` + key + `, ` + strings.Join(sums, ", ") + `
		FROM latency_hourly WHERE ` + where + `
		GROUP BY ` + group + ` HAVING SUM(requests) > 0 ORDER BY ` + group
	rows, err := l.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Latency
	for rows.Next() {
		var r Latency
		var genMs int64
		dest := []any{&r.Model, &r.KeyID, &r.Requests, &r.Timed, &r.CompletionTokens, &genMs}
		for i := range r.TTFT {
			dest = append(dest, &r.TTFT[i])
		}
		for i := range r.QueueWait {
			dest = append(dest, &r.QueueWait[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		r.Generation = time.Duration(min(genMs, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
		out = append(out, r)
	}
	return out, rows.Err()
}
