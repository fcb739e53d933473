package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
)

// blippingLedger fails the first failures settles with a connection
// error, as a database blip does, and counts the attempts.
type blippingLedger struct {
	gateway.Ledger
	mu       sync.Mutex
	failures int
	attempts int
}

var errBlip = errors.New("connection reset by peer")

func (l *blippingLedger) Settle(ctx context.Context, id string, u ledger.Usage, src ledger.Source) (ledger.Outcome, error) {
	l.mu.Lock()
	l.attempts++
	fail := l.attempts <= l.failures
	l.mu.Unlock()
	if fail {
		return ledger.Outcome{}, errBlip
	}
	return l.Ledger.Settle(ctx, id, u, src)
}

// keptSettles records the settles kept for replay.
type keptSettles struct {
	mu   sync.Mutex
	kept []string
}

func (k *keptSettles) Keep(_ context.Context, id string, _ ledger.Usage, _ ledger.Source) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept = append(k.kept, id)
	return nil
}

// TestSettleRetries: a settle that fails is tried SettleAttempts times
// with a pause between two attempts and none after the last; a pause cut
// short by the settle's budget (its context ends) ends the attempts; a
// settle not done is kept for replay. The pauses are counted, not timed.
func TestSettleRetries(t *testing.T) {
	tests := []struct {
		name string
		// failures is how many attempts fail; cut ends the budget in the
		// first pause.
		failures     int
		cut          bool
		wantAttempts int
		wantPauses   int
		wantKept     bool
		wantStatus   string
	}{
		{name: "a blip passes", failures: 1, wantAttempts: 2, wantPauses: 1, wantStatus: "settled"},
		{name: "every attempt fails", failures: gateway.SettleAttempts, wantAttempts: gateway.SettleAttempts, wantPauses: gateway.SettleAttempts - 1,
			wantKept: true, wantStatus: "reserved"},
		{name: "the budget ends in a pause", failures: gateway.SettleAttempts, cut: true, wantAttempts: 1, wantPauses: 1,
			wantKept: true, wantStatus: "reserved"},
	}
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 100*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			led := &blippingLedger{failures: tt.failures}
			kept := &keptSettles{}
			s.url = s.gateway(func(c *gateway.Config) {
				led.Ledger = c.Ledger
				c.Ledger, c.Settles = led, kept
			})
			gw := s.p.Gateways[len(s.p.Gateways)-1]
			var pauses int // the settle runs in one goroutine
			gw.SetPause(func(ctx context.Context, d time.Duration) bool {
				pauses++
				if d != gateway.SettleRetryPause {
					t.Errorf("a pause of %v, want %v", d, gateway.SettleRetryPause)
				}
				// The settle runs after the response: its context is its
				// own, not the request's, which has ended.
				if _, ok := ctx.Deadline(); !ok || ctx.Err() != nil {
					t.Errorf("the settle's context: deadline %v, err %v; want its own, live", ok, ctx.Err())
				}
				return !tt.cut
			})
			resp, body := s.do(key, chatBody("llama-8b", false, 20))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			id := resp.Header.Get(gateway.RequestIDHeader)
			gw.Wait()
			if led.attempts != tt.wantAttempts || pauses != tt.wantPauses {
				t.Errorf("%d attempts with %d pauses, want %d with %d", led.attempts, pauses, tt.wantAttempts, tt.wantPauses)
			}
			if got := len(kept.kept) == 1 && kept.kept[0] == id; got != tt.wantKept {
				t.Errorf("kept %v, want the request kept: %v", kept.kept, tt.wantKept)
			}
			if r, err := s.ledgerRow(id); err != nil || r.status != tt.wantStatus {
				t.Errorf("row %+v (%v), want %s", r, err, tt.wantStatus)
			}
		})
	}
}
