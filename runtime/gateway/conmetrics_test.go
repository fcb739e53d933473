package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestSettleRecordsTimingAndRefusals: a relayed answer is settled with how
// it came (TTFT, generation and queue wait on its ledger row, and in the
// latency rollup under its key), and a 429 and a 402 are counted in the
// team's day by status and reason, the other team's day untouched.
func TestSettleRecordsTimingAndRefusals(t *testing.T) {
	s := newStack(t, stackOpts{})
	ctx := context.Background()
	team := s.team("timed", 10*credit)
	poor := s.team("poor", 0)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team, RPM: 1})
	poorKey := s.key(adminwire.CreateKeyRequest{TeamID: poor})
	since := time.Now().Add(-time.Minute)

	resp, body := s.do(key, chatBody("llama-8b", true, 20))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("streamed request: %d %s", resp.StatusCode, body)
	}
	id := resp.Header.Get("X-Request-Id")
	if r := s.waitRow(id); r.status != ledger.StatusSettled || r.completion == 0 {
		t.Fatalf("row %+v, want settled with output", r)
	}
	var ttft, gen, queue *int64
	var keyID int64
	if err := s.db.QueryRowContext(ctx, `SELECT ttft_ms, generation_ms, queue_ms, key_id FROM usage_ledger WHERE request_id = $1`, id).
		Scan(&ttft, &gen, &queue, &keyID); err != nil {
		t.Fatal(err)
	}
	if ttft == nil || gen == nil || queue == nil || *ttft < 0 || *gen < 0 || *queue != 0 {
		t.Fatalf("row's timing: ttft %v, generation %v, queue %v; want all recorded, no queueing", ttft, gen, queue)
	}
	lat, err := s.led.TeamLatency(ctx, team, since, time.Now().Add(time.Minute), ledger.ByKeyAndModel)
	if err != nil || len(lat) != 1 || lat[0].KeyID != keyID || lat[0].Timed != 1 || lat[0].TTFT.Count() != 1 {
		t.Fatalf("TeamLatency = %+v, %v; want the one timed request under key %d", lat, err, keyID)
	}

	if resp, body := s.do(key, chatBody("llama-8b", false, 5)); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second request on an rpm-1 key: %d %s, want 429", resp.StatusCode, body)
	}
	if resp, body := s.do(poorKey, chatBody("llama-8b", false, 5)); resp.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("a request of a team without credit: %d %s, want 402", resp.StatusCode, body)
	}
	keys := quota.NewKeys(s.redis.Prefix)
	day := time.Now().UTC().Truncate(24 * time.Hour)
	read := func(team int64) []quota.RefusalCount {
		got, err := quota.ReadTeamRefusals(ctx, s.redis.Client(), keys, team, day, day.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	testenv.Eventually(t, "the refusals counted", func() bool {
		return slices.Equal(read(team), []quota.RefusalCount{{Status: 429, Reason: "rpm", Count: 1}}) &&
			slices.Equal(read(poor), []quota.RefusalCount{{Status: 402, Reason: "balance", Count: 1}})
	})
}
