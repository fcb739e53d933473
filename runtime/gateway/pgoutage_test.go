package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/settlelog"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// heldEngine streams a role chunk and three words, then waits for release
// before its usage and [DONE]: the test takes the database down between.
func heldEngine(started chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(d string) {
			fmt.Fprintf(w, "data: %s\n\n", d)
			http.NewResponseController(w).Flush()
		}
		chunk(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)
		for _, word := range []string{"one", " two", " three"} {
			chunk(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"content":"` + word + `"}}]}`)
		}
		started <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		chunk(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
		chunk(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[],"usage":{"prompt_tokens":17,"completion_tokens":3,"total_tokens":20}}`)
		chunk(`[DONE]`)
	})
}

// TestStreamDuringPostgresOutageIsBilledOnce: a stream delivered while
// PostgreSQL is down cannot settle; its exact counts are kept in Redis and
// billed once the database is back, exactly once however often the replay
// runs; and a sweeper that reaches the row first settles it from the kept
// counts instead of cancelling it for free.
func TestStreamDuringPostgresOutageIsBilledOnce(t *testing.T) {
	for _, closer := range []string{"replay", "sweeper"} {
		t.Run(closer, func(t *testing.T) {
			started, release := make(chan struct{}, 1), make(chan struct{})
			s := newStack(t, stackOpts{engine: heldEngine(started, release)})
			team := s.team("alpha", 10*credit)
			key := s.key(adminwire.CreateKeyRequest{TeamID: team})

			// This gateway reaches the database through a proxy the test
			// takes down; the test itself reads the database directly.
			proxy, led := s.ledgerBehindProxy()
			log := settlelog.New(s.redis.Client(), s.redis.Prefix, nil)
			base := s.gateway(func(cfg *gateway.Config) { cfg.Ledger, cfg.Settles = led, log })

			type answer struct {
				resp *http.Response
				body string
			}
			done := make(chan answer, 1)
			go func() {
				resp, err := s.post(context.Background(), base, key, chatBody("llama-8b", true, 100))
				if err != nil {
					done <- answer{}
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				done <- answer{resp, string(b)}
			}()
			<-started
			proxy.Cut() // PostgreSQL is down while the stream finishes
			close(release)
			got := <-done
			if got.resp == nil || got.resp.StatusCode != 200 {
				t.Fatalf("the stream failed: %+v", got)
			}
			id := got.resp.Header.Get("X-Request-Id")
			want := ledger.Usage{PromptTokens: 17, CompletionTokens: 3}
			testenv.Eventually(t, "the settle kept for replay", func() bool {
				u, ok, err := log.Completion(context.Background(), id)
				return err == nil && ok && u == want
			})
			if r, err := s.ledgerRow(id); err != nil || r.status != "reserved" {
				t.Fatalf("row %+v (%v) while the database was down, want reserved", r, err)
			}
			proxy.Restore()

			if closer == "replay" {
				for range 2 { // a second replay finds nothing to do
					if _, err := log.Replay(context.Background(), s.led, nil); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				later := testingclock.NewFakeClock(time.Now().Add(ledger.DefaultSweepAfter + time.Minute))
				sweeper, err := ledger.New(s.db, ledger.Config{Clock: later, Completions: ledger.CompletionLogs{log}})
				if err != nil {
					t.Fatal(err)
				}
				if res, err := sweeper.Sweep(context.Background()); err != nil || res.Settled != 1 || res.Cancelled != 0 {
					t.Fatalf("sweep = %+v, %v; want the row settled from the kept counts, nothing cancelled", res, err)
				}
			}
			row, err := s.ledgerRow(id)
			if err != nil || row.status != "settled" || row.prompt != want.PromptTokens || row.completion != want.CompletionTokens {
				t.Fatalf("row %+v (%v), want settled with the engine's %+v", row, err, want)
			}
			cost := ledger.Cost(want.PromptTokens, want.CompletionTokens, promptPrice, completionPrice)
			var balance, reserved int64
			if err := s.db.QueryRowContext(t.Context(), "SELECT balance_microcredits, reserved_microcredits FROM teams WHERE id = $1", team).Scan(&balance, &reserved); err != nil {
				t.Fatal(err)
			}
			if balance != 10*credit-cost || reserved != 0 {
				t.Errorf("team balance %d, holds %d; want %d debited once and nothing held", balance, reserved, cost)
			}
		})
	}
}
