package gateway_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
)

// lostSettleAck applies the first settle and then reports an error, as
// when its commit acknowledgement is lost; later calls pass through.
type lostSettleAck struct {
	gateway.Ledger
	lost atomic.Bool
}

func (l *lostSettleAck) Settle(ctx context.Context, id string, u ledger.Usage, src ledger.Source) (ledger.Outcome, error) {
	out, err := l.Ledger.Settle(ctx, id, u, src)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		return ledger.Outcome{}, errors.New("commit acknowledgement lost")
	}
	return out, err
}

// failedFinish is a gateway.Limiter whose one-round-trip end of a request always
// fails: the gateway goes on with the parts one by one.
type failedFinish struct{ gateway.Limiter }

func (failedFinish) Finish(context.Context, quota.Finish) (quota.Finished, error) {
	return quota.Finished{}, errors.New("redis: i/o timeout")
}

// TestLostSettleAckStillCountsTokens: the day's counter counts the
// request once, whether the end of the request counted it in its one
// round trip or, that failing, after the settle — whose retry finds the
// row settled (not applied by it) and still counts.
func TestLostSettleAckStillCountsTokens(t *testing.T) {
	for _, tt := range []struct {
		name   string
		limits func(gateway.Limiter) gateway.Limiter
	}{
		{"counted at the end of the request", nil},
		{"counted after the settle", func(l gateway.Limiter) gateway.Limiter { return failedFinish{l} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStack(t, stackOpts{wrapLedger: func(l gateway.Ledger) gateway.Ledger { return &lostSettleAck{Ledger: l} }, wrapLimits: tt.limits})
			team := s.team("alpha", 10*credit)
			key := s.key(adminwire.CreateKeyRequest{TeamID: team, TokensPerDay: 1_000_000, MaxStreams: 2})
			resp, body := s.do(key, chatBody("llama-8b", false, 20))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			row := s.waitRow(resp.Header.Get("X-Request-Id"))
			if row.status != "settled" {
				t.Fatalf("row %+v, want settled", row)
			}
			s.settled()
			var keyID int64
			if err := s.db.QueryRowContext(t.Context(), "SELECT id FROM api_keys WHERE team_id = $1", team).Scan(&keyID); err != nil {
				t.Fatal(err)
			}
			keys := quota.NewKeys(s.redis.Prefix)
			counter := keys.TokensPerDay("key:"+strconv.FormatInt(keyID, 10), time.Now())
			got, _ := s.redis.Client().Get(t.Context(), counter).Int64()
			if want := row.prompt + row.completion; got != want {
				t.Errorf("the day counted %d tokens, want the request's %d", got, want)
			}
			if n := s.activeStreams(s.redis.Client(), keyID); n != 0 {
				t.Errorf("%d stream slots held after the request", n)
			}
		})
	}
}
