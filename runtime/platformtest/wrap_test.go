package platformtest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// countingLedger counts the reservations and settles that pass through it.
type countingLedger struct {
	gateway.Ledger
	reserves, settles atomic.Int64
}

func (l *countingLedger) Reserve(ctx context.Context, r ledger.Reservation) (ledger.Reserved, error) {
	l.reserves.Add(1)
	return l.Ledger.Reserve(ctx, r)
}

func (l *countingLedger) Settle(ctx context.Context, id string, u ledger.Usage, src ledger.Source) (ledger.Outcome, error) {
	l.settles.Add(1)
	return l.Ledger.Settle(ctx, id, u, src)
}

// TestGatewayWrap: Options.Gateway wraps the ledger of every gateway, the
// platform's and one StartGateway adds, and Options.Engines serves the
// model straight from its engine; what a gateway does after its answers
// is done once Settled returns.
func TestGatewayWrap(t *testing.T) {
	const model = "llama-8b"
	_, engine := platformtest.ServeSim(t, enginesim.Config{ServedModelName: model, TimeScale: 200, Seed: 1})
	var wrapped []*countingLedger
	p := platformtest.Start(t, platformtest.Options{
		Engines: map[string][]engineclient.Target{model: {{URL: engine}}},
		Gateway: func(cfg *gateway.Config) {
			l := &countingLedger{Ledger: cfg.Ledger}
			wrapped = append(wrapped, l)
			cfg.Ledger = l
		}})
	second := p.StartGateway()
	p.Model(model, model)
	team := p.Team("wrap", 1_000_000)
	key := p.Key(adminwire.CreateKeyRequest{TeamID: team, Name: "k"})
	for _, base := range []string{p.URL, second} {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", base, resp.StatusCode, body)
		}
	}
	p.Settled()
	if len(wrapped) != 2 {
		t.Fatalf("the hook wrapped %d ledgers, want 2 (one per gateway)", len(wrapped))
	}
	for i, l := range wrapped {
		if got := [2]int64{l.reserves.Load(), l.settles.Load()}; got != [2]int64{1, 1} {
			t.Errorf("gateway %d: reserves and settles %v, want [1 1]", i, got)
		}
	}
	http.DefaultClient.CloseIdleConnections() // keep-alive conns are not leaks
}
