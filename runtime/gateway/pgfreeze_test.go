package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/settlelog"
)

// freezeEngine streams a role chunk and three words. A request whose
// prompt says "hold" then waits for the client to go; any other waits for
// release, then ends with its usage and [DONE].
func freezeEngine(release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(d string) {
			fmt.Fprintf(w, "data: %s\n\n", d)
			http.NewResponseController(w).Flush()
		}
		chunk(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)
		for _, word := range []string{"one", " two", " three"} {
			chunk(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama-8b","choices":[{"index":0,"delta":{"content":"` + word + `"}}]}`)
		}
		if strings.Contains(string(body), "hold") {
			<-r.Context().Done()
			return
		}
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

// Bounds the test checks, with slack for a loaded machine: what the
// gateway promises, against what the freeze cost before (130 s for a new
// request, about two minutes for a settle to be kept, a shutdown that kept
// nothing).
const (
	freezeSlack = 5 * time.Second
	// refusalBound: a request's catalog load, then its quote and
	// reservation, each bounded.
	refusalBound = gateway.CatalogLoadTimeout + gateway.DefaultLedgerTimeout + freezeSlack
	// keptBound: the settle's budget, then the keep.
	keptBound = gateway.SettleTimeout + gateway.KeepTimeout + freezeSlack
)

// TestFrozenPostgres: PostgreSQL freezes for every part of the platform —
// its proxy holds every byte while connections stay open, as a stopped
// server or a black-holed network looks to the gateway — with two streams
// open. A new request gets
// a prompt 503; the stream that finishes during the freeze has its exact
// usage in the settle log within the settle's bound; the gateway, shut
// down during the freeze with the other stream still open, ends that
// stream and keeps its partial usage before Serve returns; and once the
// database thaws, the replay bills both streams' tokens.
func TestFrozenPostgres(t *testing.T) {
	release := make(chan struct{})
	s := newStack(t, stackOpts{engine: freezeEngine(release), proxied: true})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	proxy := s.p.PostgresProxy
	// The gateway's settle log, read here as a replayer reads it.
	log := settlelog.New(s.redis.Client(), s.redis.Prefix, nil)
	// grace is the gateway's shutdown grace: short, the held stream
	// outlives it.
	const grace = 200 * time.Millisecond
	var cfg gateway.Config
	s.gateway(func(c *gateway.Config) {
		c.ShutdownGrace = grace
		cfg = *c
	})
	gw, err := gateway.New(cfg) // served by Serve, so that the test can shut it down
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	served := make(chan error, 1)
	go func() { served <- gw.Serve(serveCtx, ln) }()
	base := "http://" + ln.Addr().String()
	frozen := false
	defer func() {
		if frozen {
			proxy.Thaw()
		}
	}()

	type answer struct {
		id, body string
		status   int
		err      error
	}
	// stream sends a streamed request; flowing is closed once the client
	// has its first word, or its answer ended without one.
	stream := func(prompt string) (done <-chan answer, flowing <-chan struct{}) {
		out, first := make(chan answer, 1), make(chan struct{})
		go func() {
			var once sync.Once
			defer once.Do(func() { close(first) })
			body := `{"model":"llama-8b","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"` + prompt + `"}]}`
			resp, err := s.post(context.Background(), base, key, body)
			if err != nil {
				out <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			var b strings.Builder
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				b.WriteString(line)
				if strings.Contains(line, "one") {
					once.Do(func() { close(first) })
				}
				if err != nil {
					if errors.Is(err, io.EOF) {
						err = nil
					}
					out <- answer{id: resp.Header.Get(gateway.RequestIDHeader), body: b.String(), status: resp.StatusCode, err: err}
					return
				}
			}
		}()
		return out, first
	}
	finishing, finishingFlows := stream("finish")
	holding, holdingFlows := stream("hold")
	// The gateway relays a word only once the request's reservation is
	// held: both are in the ledger before the freeze, as the test means.
	<-finishingFlows
	<-holdingFlows
	proxy.Freeze()
	frozen = true

	// A new request while the database is frozen: a prompt 503.
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*refusalBound)
	resp, err := s.post(ctx, base, key, chatBody("llama-8b", false, 10))
	took := time.Since(t0)
	cancel()
	switch {
	case err != nil:
		t.Errorf("a request during the freeze: %v after %v, want a 503 within %v", err, took.Round(time.Millisecond), refusalBound)
	case resp.StatusCode != http.StatusServiceUnavailable || took > refusalBound:
		resp.Body.Close()
		t.Errorf("a request during the freeze: %d after %v, want 503 within %v", resp.StatusCode, took.Round(time.Millisecond), refusalBound)
	default:
		resp.Body.Close()
		t.Logf("a request during the freeze: 503 after %v", took.Round(time.Millisecond))
	}

	// The stream that finishes during the freeze: its exact usage is kept.
	close(release)
	a := <-finishing
	answered := time.Now()
	if a.err != nil || a.status != http.StatusOK || !strings.Contains(a.body, "[DONE]") {
		t.Fatalf("the stream that finished during the freeze: %+v", a)
	}
	exact := ledger.Usage{PromptTokens: 17, CompletionTokens: 3}
	kept := func(id string) (ledger.Usage, bool) {
		u, ok, err := log.Completion(context.Background(), id)
		return u, err == nil && ok
	}
	for {
		if u, ok := kept(a.id); ok {
			if u != exact {
				t.Errorf("kept %+v, want the engine's %+v", u, exact)
			}
			t.Logf("settle kept %v after the answer", time.Since(answered).Round(time.Millisecond))
			break
		}
		if time.Since(answered) > keptBound {
			t.Errorf("the settle of a stream answered during the freeze is not kept after %v", keptBound)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Shut down during the freeze, the other stream still open: Serve
	// returns only once that stream's partial usage is kept.
	stopAt := time.Now()
	shutdown()
	// The whole shutdown: the grace, the requests' end, the settles' last
	// budget, the keep.
	stopBound := grace + gateway.RequestsEndTimeout + gateway.ShutdownSettleBudget + gateway.KeepTimeout + freezeSlack
	select {
	case err := <-served:
		t.Logf("Serve returned %v after the shutdown began (%v)", time.Since(stopAt).Round(time.Millisecond), err)
	case <-time.After(stopBound):
		t.Errorf("Serve still shutting down after %v", stopBound)
		err := <-served
		t.Logf("Serve returned %v after the shutdown began (%v)", time.Since(stopAt).Round(time.Millisecond), err)
	}
	h := <-holding
	if h.id == "" {
		t.Fatalf("the held stream: %+v", h)
	}
	if u, ok := kept(h.id); !ok || u.CompletionTokens != 3 {
		t.Errorf("when Serve returned the held stream's settle was kept: %v (%+v), want its 3 delivered tokens", ok, u)
	}

	// The database thaws: the replay bills both streams' tokens.
	proxy.Thaw()
	frozen = false
	if _, err := log.Replay(context.Background(), s.led, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id         string
		completion int64
	}{{a.id, 3}, {h.id, 3}} {
		r, err := s.ledgerRow(c.id)
		if err != nil || r.status != "settled" || r.completion != c.completion {
			t.Errorf("row %s: %+v (%v), want settled with %d completion tokens", c.id, r, err, c.completion)
		}
	}
	// The 503's reservation was never made, or its batch commits when the
	// held bytes reach the thawed server, possibly after the replay took
	// its kept cancel: no token was delivered for it, and the sweeper
	// cancels it for nothing, as it must.
	later := testingclock.NewFakeClock(time.Now().Add(ledger.DefaultSweepAfter + time.Minute))
	sweeper, err := ledger.New(s.db, ledger.Config{Clock: later, Completions: ledger.CompletionLogs{log}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sweeper.Sweep(context.Background()); err != nil || res.Settled != 0 {
		t.Errorf("sweep after the replay: %+v, %v; want nothing settled (every delivered token was)", res, err)
	}
	var open int
	if err := s.db.QueryRowContext(context.Background(),
		"SELECT count(*) FROM usage_ledger WHERE status = 'reserved'").Scan(&open); err != nil || open != 0 {
		t.Errorf("%d rows still reserved (%v), want none", open, err)
	}
	if _, err := s.led.Audit(context.Background()); err != nil {
		t.Error(err)
	}
}
