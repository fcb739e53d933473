package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
)

// lostAckLedger commits every reservation and then reports an error, as
// when the commit's acknowledgement is lost with the connection.
type lostAckLedger struct{ gateway.Ledger }

func (l lostAckLedger) Reserve(ctx context.Context, r ledger.Reservation) (ledger.Reserved, error) {
	if _, err := l.Ledger.Reserve(ctx, r); err != nil {
		return ledger.Reserved{}, err
	}
	return ledger.Reserved{}, errors.New("commit acknowledgement lost")
}

// TestReserveErrorLeavesNoHold: a reservation that committed but reported
// an error is cancelled right after the refusal, so the team's credit is not held until
// the sweeper's window (false 402s near the balance).
func TestReserveErrorLeavesNoHold(t *testing.T) {
	s := newStack(t, stackOpts{wrapLedger: func(l gateway.Ledger) gateway.Ledger { return lostAckLedger{l} }})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	resp, body := s.do(key, chatBody("llama-8b", false, 100))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d: %s; want 503", resp.StatusCode, body)
	}
	// The cancel runs in the background (the 503 does not wait on the
	// database that failed): wait for the row to leave 'reserved'.
	row := s.waitRow(resp.Header.Get("X-Request-Id"))
	if row.status != "cancelled" {
		t.Errorf("row %+v, want cancelled", row)
	}
	var reserved int64
	if err := s.db.QueryRowContext(t.Context(), "SELECT reserved_microcredits FROM teams WHERE id = $1", team).Scan(&reserved); err != nil {
		t.Fatal(err)
	}
	if reserved != 0 {
		t.Errorf("the team still holds %d micro-credits", reserved)
	}
}
