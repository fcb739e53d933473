package quota

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestRefusalDays counts refusals per team and UTC day and per platform
// hour: a range sums its days (or hours), another team's never count, a day
// outside the range does not either, and each hash expires on its own.
func TestRefusalDays(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	start := time.Date(2025, 3, 14, 23, 30, 0, 0, time.UTC)
	clock := testingclock.NewFakeClock(start)
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix, Clock: clock})
	ctx := context.Background()
	record := func(r Refusal, n int) {
		t.Helper()
		for range n {
			if err := l.RecordRefusal(ctx, r); err != nil {
				t.Fatalf("record refusal: %v", err)
			}
		}
	}
	record(Refusal{TeamID: 1, Status: http.StatusTooManyRequests, Reason: "rpm"}, 3)
	record(Refusal{TeamID: 1, Model: "m8b", Status: http.StatusServiceUnavailable, Reason: "no_node"}, 2)
	clock.SetTime(start.Add(time.Hour)) // the next UTC day
	record(Refusal{TeamID: 1, Status: http.StatusTooManyRequests, Reason: "rpm"}, 1)
	record(Refusal{TeamID: 2, Model: "m8b", Status: http.StatusPaymentRequired, Reason: "balance"}, 5)
	day1 := start.Truncate(24 * time.Hour)
	tests := []struct {
		name     string
		team     int64
		from, to time.Time
		want     []RefusalCount
	}{
		{"both days", 1, day1, day1.Add(48 * time.Hour), []RefusalCount{
			{Status: 429, Reason: "rpm", Count: 4}, {Status: 503, Reason: "no_node", Count: 2}}},
		{"the first day", 1, day1, day1.Add(24 * time.Hour), []RefusalCount{
			{Status: 429, Reason: "rpm", Count: 3}, {Status: 503, Reason: "no_node", Count: 2}}},
		{"the other team", 2, day1, day1.Add(48 * time.Hour), []RefusalCount{{Status: 402, Reason: "balance", Count: 5}}},
		{"a day without refusals", 1, day1.Add(-24 * time.Hour), day1, []RefusalCount{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadTeamRefusals(ctx, rdb, l.Keys(), tt.team, tt.from, tt.to)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("ReadTeamRefusals = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	got, err := ReadPlatformRefusals(ctx, rdb, l.Keys(), clock.Now().Add(-time.Hour), clock.Now())
	want := []RefusalCount{{Status: 402, Reason: "balance", Model: "m8b", Count: 5}, {Status: 429, Reason: "rpm", Count: 4},
		{Status: 503, Reason: "no_node", Model: "m8b", Count: 2}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ReadPlatformRefusals over the last hour = %+v, %v; want %+v", got, err, want)
	}
	for _, k := range []struct {
		key string
		max time.Duration
	}{{l.Keys().TeamRefusals(1, start), TeamRefusalTTL}, {l.Keys().PlatformRefusals(start), platformRefusalTTL}} {
		if ttl, err := rdb.TTL(ctx, k.key).Result(); err != nil || ttl <= 0 || ttl > k.max {
			t.Errorf("%s has TTL %v (%v), want in (0, %v]", k.key, ttl, err, k.max)
		}
	}
	if err := l.RecordRefusal(ctx, Refusal{TeamID: 1, Status: 429, Reason: "two words"}); !errors.Is(err, ErrInvalidName) {
		t.Errorf("a reason with a space: %v, want ErrInvalidName", err)
	}
}
