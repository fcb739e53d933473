package gateway

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
)

// lostSettleAck applies the first settle and then reports an error, as
// when its commit acknowledgement is lost; later calls pass through.
type lostSettleAck struct {
	Ledger
	lost atomic.Bool
}

func (l *lostSettleAck) Settle(ctx context.Context, id string, u ledger.Usage, src ledger.Source) (ledger.Outcome, error) {
	out, err := l.Ledger.Settle(ctx, id, u, src)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		return ledger.Outcome{}, errors.New("commit acknowledgement lost")
	}
	return out, err
}

// TestLostSettleAckStillCountsTokens: the settle's retry finds the row
// settled (not applied by it) and the day's counter still counts the
// request, once.
func TestLostSettleAckStillCountsTokens(t *testing.T) {
	s := newStack(t, stackOpts{wrapLedger: func(l Ledger) Ledger { return &lostSettleAck{Ledger: l} }})
	team := s.team("alpha", 10*credit)
	key := s.key(admin.CreateKeyRequest{TeamID: team, TokensPerDay: 1_000_000})
	resp, body := s.do(key, chatBody("llama-8b", false, 20))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	row := s.waitRow(resp.Header.Get("X-Request-Id"))
	if row.status != "settled" {
		t.Fatalf("row %+v, want settled", row)
	}
	var keyID int64
	if err := s.db.QueryRowContext(t.Context(), "SELECT id FROM api_keys WHERE team_id = $1", team).Scan(&keyID); err != nil {
		t.Fatal(err)
	}
	keys := quota.NewKeys(s.redis.Prefix)
	counter := keys.TokensPerDay("key:"+itoa(keyID), time.Now())
	rdb := s.redis.Client()
	var got int64
	deadline := time.Now().Add(20 * time.Second)
	for got == 0 && time.Now().Before(deadline) {
		got, _ = rdb.Get(t.Context(), counter).Int64()
		time.Sleep(10 * time.Millisecond)
	}
	if want := row.prompt + row.completion; got != want {
		t.Errorf("the day counted %d tokens, want the request's %d", got, want)
	}
}
