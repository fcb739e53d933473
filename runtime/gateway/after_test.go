package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
)

// heldLedger holds every settle and cancel until release is closed, and
// tells on closed which request's settle arrived.
type heldLedger struct {
	gateway.Ledger
	closing chan string
	release chan struct{}
}

func (l heldLedger) Settle(_ context.Context, id string, u ledger.Usage, src ledger.Source) (ledger.Outcome, error) {
	l.closing <- id
	<-l.release
	return l.Ledger.Settle(context.Background(), id, u, src)
}

func (l heldLedger) Cancel(_ context.Context, id string) (ledger.Outcome, error) {
	l.closing <- id
	<-l.release
	return l.Ledger.Cancel(context.Background(), id)
}

// TestResponseEndsBeforeTheSettle: nothing after the last byte delays the
// client. With the ledger's settle held, a streamed and a non-streamed
// answer each reach the client complete (the body read to its end), and
// the rows settle once the ledger lets them.
func TestResponseEndsBeforeTheSettle(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	held := heldLedger{closing: make(chan string, 2), release: make(chan struct{})}
	base := s.gateway(func(cfg *gateway.Config) { held.Ledger = cfg.Ledger; cfg.Ledger = held })
	released := false
	defer func() {
		if !released {
			close(held.release)
		}
	}()

	var ids []string
	for _, streamed := range []bool{true, false} {
		type answer struct {
			resp *http.Response
			body []byte
			err  error
		}
		got := make(chan answer, 1)
		go func() {
			resp, err := s.post(context.Background(), base, key, chatBody("llama-8b", streamed, 20))
			if err != nil {
				got <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body) // to the end of the response
			got <- answer{resp, body, err}
		}()
		var a answer
		select {
		case a = <-got:
		case <-time.After(time.Minute): // a bound for a hung test, not a speed claim
			t.Fatalf("stream %v: the response did not end while its settle was held", streamed)
		}
		resp, body, err := a.resp, a.body, a.err
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %v: %v (%v)", streamed, body, err)
		}
		if streamed && !strings.Contains(string(body), "[DONE]") {
			t.Fatalf("stream without [DONE]: %s", body)
		}
		id := resp.Header.Get("X-Request-Id")
		// The settle is started (and held) only now: the client had all
		// of its answer first.
		if got := <-held.closing; got != id {
			t.Fatalf("settle of %s, want %s", got, id)
		}
		if r, err := s.ledgerRow(id); err != nil || r.status != "reserved" {
			t.Fatalf("row %+v (%v) while its settle is held, want reserved", r, err)
		}
		ids = append(ids, id)
	}
	close(held.release)
	released = true
	for _, id := range ids {
		if r := s.waitRow(id); r.status != "settled" || r.from != "exact" {
			t.Errorf("row %+v, want settled exact", r)
		}
	}
}

// panicStream relays some events, then panics, as a bug in the relay
// would.
type panicStream struct {
	dispatch.Stream
	left int
}

func (p *panicStream) Recv() (dispatch.Event, error) {
	if p.left == 0 {
		panic("relay bug")
	}
	p.left--
	return p.Stream.Recv()
}

type panicDispatcher struct{ dispatch.Dispatcher }

func (d panicDispatcher) Dispatch(ctx context.Context, job *dispatch.Job) (dispatch.Stream, error) {
	st, err := d.Dispatcher.Dispatch(ctx, job)
	if err != nil {
		return nil, err
	}
	return &panicStream{Stream: st, left: 4}, nil
}

// TestPanicInTheRelayStillSettles: a panic mid-stream ends the request
// through the recovery handler, and the tokens relayed before it are
// billed, not left to the sweeper.
func TestPanicInTheRelayStillSettles(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	base := s.gateway(func(cfg *gateway.Config) { cfg.Dispatcher = panicDispatcher{cfg.Dispatcher} })
	resp, err := s.post(context.Background(), base, key, chatBody("llama-8b", true, 200))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r := s.waitRow(resp.Header.Get("X-Request-Id"))
	if r.status != "settled" || r.from != "partial" || r.completion == 0 {
		t.Errorf("row %+v after a panic in the relay, want settled partial with the tokens relayed", r)
	}
	if s.activeStreams(s.redis.Client(), 1) != 0 {
		t.Error("the panicked request's stream slot is still held")
	}
	if !strings.Contains(s.logs.String(), "handler panic") {
		t.Error("the panic was not logged")
	}
}

// failingReleases is a gateway.Limiter whose first releases fail, as they do when
// Redis is slow under a mass disconnect.
type failingReleases struct {
	gateway.Limiter
	failures atomic.Int64 // releases still to fail
}

func (f *failingReleases) ReleaseStream(ctx context.Context, keyID, requestID string) error {
	if f.failures.Add(-1) >= 0 {
		return errors.New("redis: i/o timeout")
	}
	return f.Limiter.ReleaseStream(ctx, keyID, requestID)
}

// Finish fails like a release: the end of a request first tries the
// release in its one round trip.
func (f *failingReleases) Finish(ctx context.Context, fin quota.Finish) (quota.Finished, error) {
	if fin.Release && f.failures.Add(-1) >= 0 {
		return quota.Finished{}, errors.New("redis: i/o timeout")
	}
	return f.Limiter.Finish(ctx, fin)
}

// TestFailedSlotReleaseIsRetried: a stream slot whose release fails is
// given back by a retry, not left to count against the key's max_streams
// until its deadline.
func TestFailedSlotReleaseIsRetried(t *testing.T) {
	f := &failingReleases{}
	f.failures.Store(3)
	s := newStack(t, stackOpts{wrapLimits: func(l gateway.Limiter) gateway.Limiter { f.Limiter = l; return f }})
	team := s.team("t", 100*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team, MaxStreams: 1})
	for i := range 2 { // the second request needs the first one's slot
		resp, err := s.post(context.Background(), s.url, key,
			`{"model":"llama-8b","max_tokens":5,"messages":[{"role":"user","content":"hello"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d %s", i, resp.StatusCode, body)
		}
		s.settled() // the retries run in the background; settled waits for them
		if n := s.activeStreams(s.redis.Client(), 1); n != 0 {
			t.Fatalf("request %d: %d slots held after the retries", i, n)
		}
	}
	if f.failures.Load() >= 0 {
		t.Errorf("the release failed %d times fewer than asked", f.failures.Load()+1)
	}
}
