package quota

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The durable refusal counts: every refusal the gateway answers a known
// team with (402, 429, 503), per team and UTC day, and per UTC hour for the
// platform, by status and reason. They live in Redis rather than in the
// database because refusals come in floods (a 429 is how the platform
// sheds load) and the database is itself a reason for a 503: counting them
// there would add writes exactly when it is busiest or gone. A refusal is
// already a Redis round trip on its way out; an HINCRBY is O(1).
const (
	// TeamRefusalTTL keeps a team's day for longer than the console's
	// longest range (92 days) and a week more.
	TeamRefusalTTL = 100 * 24 * time.Hour
	// platformRefusalTTL keeps an hour while the platform's "last day"
	// (the 25 whole hours that cover it) can still reach it, and a day
	// more for clocks that differ between replicas.
	platformRefusalTTL = 49 * time.Hour
	// refusalDayFormat and refusalHourFormat name the hashes' periods.
	refusalDayFormat  = "2006-01-02"
	refusalHourFormat = "2006-01-02T15"
)

// TeamRefusals is the hash of a team's refusals on the UTC day of t:
// "<status> <reason>" → count.
func (k Keys) TeamRefusals(teamID int64, t time.Time) string {
	return k.prefix + "refusals:team:{" + strconv.FormatInt(teamID, 10) + "}:" + t.UTC().Format(refusalDayFormat)
}

// PlatformRefusals is the hash of every team's refusals in the UTC hour of
// t: "<status> <reason> <model>" → count (model empty when the refusal
// came before the body named one).
func (k Keys) PlatformRefusals(t time.Time) string {
	return k.prefix + "refusals:hour:" + t.UTC().Format(refusalHourFormat)
}

// Refusal is one refused request of a known team.
type Refusal struct {
	TeamID int64
	// Model is empty when the refusal came before the body was read (the
	// key's stream slots and requests per minute are checked first).
	Model  string
	Status int
	// Reason is the gateway's bounded reason label (rpm, streams,
	// tokens_per_day, balance, no_node, queue_timeout, at_zero, ...).
	Reason string
}

// RefusalCount is how many refusals of one status and reason (and model,
// in the platform's counts) a period had.
type RefusalCount struct {
	Status int
	Reason string
	Model  string
	Count  int64
}

// RecordRefusal counts r in its team's day and the platform's hour of
// Config.Clock: one pipelined round trip (two HINCRBY and their EXPIRE),
// paid only by refused requests. The counts exist for people to read (the
// console), never for admission.
func (l *Limiter) RecordRefusal(ctx context.Context, r Refusal) error {
	if r.TeamID <= 0 || r.Status <= 0 || r.Reason == "" || strings.ContainsAny(r.Reason+r.Model, " ") {
		return fmt.Errorf("record refusal %+v: %w", r, ErrInvalidName)
	}
	now := l.cfg.Clock.Now()
	team, hour := l.keys.TeamRefusals(r.TeamID, now), l.keys.PlatformRefusals(now)
	status := strconv.Itoa(r.Status)
	pipe := l.rdb.Pipeline()
	pipe.HIncrBy(ctx, team, status+" "+r.Reason, 1)
	pipe.Expire(ctx, team, TeamRefusalTTL)
	pipe.HIncrBy(ctx, hour, status+" "+r.Reason+" "+r.Model, 1)
	pipe.Expire(ctx, hour, platformRefusalTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("record refusal of team %d: %w", r.TeamID, err)
	}
	return nil
}

// ReadTeamRefusals returns the team's refusals on the UTC days that
// [from, to) touches, summed per status and reason, sorted by status and
// then reason: one HGETALL per day, pipelined.
func ReadTeamRefusals(ctx context.Context, rdb redis.UniversalClient, keys Keys, teamID int64, from, to time.Time) ([]RefusalCount, error) {
	var names []string
	for d := from.UTC().Truncate(24 * time.Hour); d.Before(to); d = d.Add(24 * time.Hour) {
		names = append(names, keys.TeamRefusals(teamID, d))
	}
	out, err := readRefusalHashes(ctx, rdb, names)
	if err != nil {
		return nil, fmt.Errorf("read refusals of team %d: %w", teamID, err)
	}
	return out, nil
}

// ReadPlatformRefusals returns every team's refusals in the whole UTC
// hours covering [from, to), summed per status, reason and model.
func ReadPlatformRefusals(ctx context.Context, rdb redis.UniversalClient, keys Keys, from, to time.Time) ([]RefusalCount, error) {
	var names []string
	for h := from.UTC().Truncate(time.Hour); h.Before(to); h = h.Add(time.Hour) {
		names = append(names, keys.PlatformRefusals(h))
	}
	out, err := readRefusalHashes(ctx, rdb, names)
	if err != nil {
		return nil, fmt.Errorf("read the platform's refusals: %w", err)
	}
	return out, nil
}

// readRefusalHashes sums the hashes names, whose fields are "<status>
// <reason>[ <model>]".
func readRefusalHashes(ctx context.Context, rdb redis.UniversalClient, names []string) ([]RefusalCount, error) {
	if len(names) == 0 {
		return nil, nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.HGetAll(ctx, n)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	sums := map[RefusalCount]int64{}
	for _, c := range cmds {
		for field, v := range c.Val() {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", field, err)
			}
			parts := strings.SplitN(field, " ", 3)
			if len(parts) < 2 {
				return nil, fmt.Errorf("field %q: not <status> <reason>", field)
			}
			status, err := strconv.Atoi(parts[0])
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", field, err)
			}
			k := RefusalCount{Status: status, Reason: parts[1]}
			if len(parts) == 3 {
				k.Model = parts[2]
			}
			sums[k] += n
		}
	}
	out := make([]RefusalCount, 0, len(sums))
	for k, n := range sums {
		k.Count = n
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Status != b.Status {
			return a.Status < b.Status
		}
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		return a.Model < b.Model
	})
	return out, nil
}
