package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	testingclock "k8s.io/utils/clock/testing"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
)

// dispatchLog records which requests reached the dispatcher, and which of
// their streams were closed.
type dispatchLog struct {
	dispatch.Dispatcher
	mu     sync.Mutex
	sent   map[string]chan struct{}
	closed map[string]chan struct{}
	caps   map[string]int64 // the max_tokens each request was sent with
}

func newDispatchLog(d dispatch.Dispatcher) *dispatchLog {
	return &dispatchLog{Dispatcher: d, sent: map[string]chan struct{}{}, closed: map[string]chan struct{}{},
		caps: map[string]int64{}}
}

// signal returns the channel m holds for id, made on first use.
func (l *dispatchLog) signal(m map[string]chan struct{}, id string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m[id] == nil {
		m[id] = make(chan struct{})
	}
	return m[id]
}

func (l *dispatchLog) Dispatch(ctx context.Context, job *dispatch.Job) (dispatch.Stream, error) {
	st, err := l.Dispatcher.Dispatch(ctx, job)
	if err != nil {
		return st, err
	}
	if m := job.MaxOutput; m > 0 {
		l.mu.Lock()
		l.caps[job.RequestID] = m
		l.mu.Unlock()
	}
	close(l.signal(l.sent, job.RequestID))
	return &loggedStream{Stream: st, closed: l.signal(l.closed, job.RequestID)}, nil
}

// dispatched reports whether id reached the engine, waiting up to d.
func (l *dispatchLog) dispatched(id string, d time.Duration) bool {
	return waitClosed(l.signal(l.sent, id), d)
}

// loggedStream closes closed on its first Close.
type loggedStream struct {
	dispatch.Stream
	once   sync.Once
	closed chan struct{}
}

func (s *loggedStream) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.Stream.Close()
}

// gatedLedger lets a test hold a reservation until its request reached the
// engine, and choose its answer. Only the reservations made while gate is
// set are gated.
type gatedLedger struct {
	gateway.Ledger
	log *dispatchLog

	mu   sync.Mutex
	gate *gate
}

// gate is what a gated reservation does.
type gate struct {
	release chan struct{} // answered once closed (open)
	once    sync.Once
	commit  bool  // reserve in the ledger before answering
	fail    error // the answer's error, if any
	// sawDispatch is closed when the reservation found its request at the
	// engine before it answered.
	sawDispatch chan struct{}
	answered    chan struct{} // closed as the reservation answers
}

// newGate returns a closed gate, opened at the latest when the test ends,
// so that a gateway that waits for it cannot hang the test.
func newGate(t *testing.T, commit bool, fail error) *gate {
	g := &gate{release: make(chan struct{}), commit: commit, fail: fail,
		sawDispatch: make(chan struct{}), answered: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

// open lets the gated reservation answer.
func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

func (l *gatedLedger) set(g *gate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gate = g
}

func (l *gatedLedger) Reserve(ctx context.Context, r ledger.Reservation) (ledger.Reserved, error) {
	l.mu.Lock()
	g := l.gate
	l.gate = nil
	l.mu.Unlock()
	if g == nil {
		return l.Ledger.Reserve(ctx, r)
	}
	defer close(g.answered)
	// A reservation made before the dispatch waits the whole limit here.
	if l.log.dispatched(r.RequestID, waitLimit) {
		close(g.sawDispatch)
	}
	<-g.release
	res := ledger.Reserved{RequestID: r.RequestID}
	if g.commit {
		var err error
		if res, err = l.Ledger.Reserve(ctx, r); err != nil {
			return res, err
		}
	}
	return res, g.fail
}

// earlyStack is a stack whose gateway quotes, with its dispatches logged
// and its reservations gated, a team with ample credit and a key of it
// with a stream limit, whose view of the team is warm (one request done).
type earlyStack struct {
	*stack
	log  *dispatchLog
	led  *gatedLedger
	team int64
	key  string
}

func newEarlyStack(t *testing.T) *earlyStack {
	t.Helper()
	e := &earlyStack{}
	s := newStack(t, stackOpts{wrapLedger: func(l gateway.Ledger) gateway.Ledger {
		e.led = &gatedLedger{Ledger: l}
		return e.led
	}})
	e.stack = s
	s.url = s.gateway(func(c *gateway.Config) {
		e.log = newDispatchLog(c.Dispatcher)
		c.Dispatcher = e.log
		e.led.log = e.log
	})
	// The view of balances never ages here: however slow the machine,
	// the warm-up below keeps it fresh for the test's requests
	// (TestBalanceView covers its TTL).
	s.p.Gateways[len(s.p.Gateways)-1].SetBalanceClock(testingclock.NewFakePassiveClock(time.Now()))
	e.team = s.team("alpha", 1000*credit)
	e.key = s.key(adminwire.CreateKeyRequest{TeamID: e.team, MaxStreams: 4})
	// The first request of the team reserves before its dispatch, and
	// shows the gateway the team's balance.
	if resp, body := s.do(e.key, chatBody("llama-8b", false, 20)); resp.StatusCode != http.StatusOK {
		t.Fatalf("warm-up: %d %s", resp.StatusCode, body)
	}
	s.settled()
	return e
}

// TestEarlyReservation: once the gateway has seen a team's ample balance,
// the team's next request reaches its engine while its reservation runs.
// Whatever the ledger answers, the client gets what a reservation before
// the dispatch gives it: the answer, or the same refusal with the engine's
// stream closed and nothing held or billed.
func TestEarlyReservation(t *testing.T) {
	cases := []struct {
		name     string
		stream   bool
		commit   bool
		fail     error
		status   int
		code     string
		rowState string // "" when no row may exist
	}{
		{name: "held", commit: true, status: http.StatusOK, rowState: "settled"},
		{name: "held/stream", stream: true, commit: true, status: http.StatusOK, rowState: "settled"},
		{name: "balance refused", fail: ledger.ErrInsufficientBalance, status: http.StatusPaymentRequired, code: "insufficient_balance"},
		{name: "balance refused/stream", stream: true, fail: ledger.ErrInsufficientBalance, status: http.StatusPaymentRequired, code: "insufficient_balance"},
		{name: "commit unconfirmed", commit: true, fail: errors.New("commit acknowledgement lost"), status: http.StatusServiceUnavailable, code: "service_unavailable", rowState: "cancelled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEarlyStack(t)
			before := e.teamBalance()
			g := newGate(t, tc.commit, tc.fail)
			e.led.set(g)
			g.open()
			resp, body := e.do(e.key, chatBody("llama-8b", tc.stream, 20))
			id := resp.Header.Get("X-Request-Id")
			if !waitClosed(g.sawDispatch, 0) {
				t.Errorf("the reservation answered before its request reached the engine")
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d: %s; want %d", resp.StatusCode, body, tc.status)
			}
			if tc.code != "" {
				var eb struct {
					Error struct{ Code, Type string }
				}
				if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Error.Code != tc.code {
					t.Errorf("body %s: want an OpenAI error with code %q", body, tc.code)
				}
				if !waitClosed(e.log.signal(e.log.closed, id), waitLimit) {
					t.Errorf("the refused request's engine stream was not closed")
				}
			}
			e.settled()
			r, err := e.ledgerRow(id)
			switch {
			case tc.rowState == "" && err == nil:
				t.Errorf("refused request left a row %+v", r)
			case tc.rowState != "" && (err != nil || r.status != tc.rowState):
				t.Errorf("row %+v (%v), want %s", r, err, tc.rowState)
			}
			after := e.teamBalance()
			if after.Reserved != 0 {
				t.Errorf("the team still holds %d micro-credits", after.Reserved)
			}
			if tc.rowState != "settled" && after.Balance != before.Balance {
				t.Errorf("balance %d, want %d: a refused request was billed", after.Balance, before.Balance)
			}
			if n := e.activeStreams(e.redis.Client(), 1); n != 0 {
				t.Errorf("%d stream slots still held", n)
			}
		})
	}
}

// TestEarlyReservationHoldsTheAnswer: while an early reservation has not
// answered, the client sees nothing of the answer — not even its
// headers — though the engine has finished generating it.
func TestEarlyReservationHoldsTheAnswer(t *testing.T) {
	e := newEarlyStack(t)
	g := newGate(t, true, nil)
	e.led.set(g)
	type answer struct {
		resp *http.Response
		at   bool // the reservation had answered when the headers came
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := e.post(context.Background(), e.url, e.key, chatBody("llama-8b", true, 5))
		got <- answer{resp, waitClosed(g.answered, 0), err}
	}()
	if !waitClosed(g.sawDispatch, waitLimit) {
		t.Fatal("the request did not reach the engine while its reservation waited")
	}
	sim := e.sims["llama-8b"]
	for deadline := time.Now().Add(waitLimit); sim.Stats().Finished < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not finish the answer")
		}
	}
	select {
	case a := <-got:
		t.Fatalf("the client got an answer (%v, %v) before the reservation", a.resp.Status, a.err)
	default:
	}
	g.open()
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.resp.Body.Close()
	b, _ := io.ReadAll(a.resp.Body)
	if a.resp.StatusCode != http.StatusOK || !a.at || !strings.Contains(string(b), "[DONE]") {
		t.Errorf("status %d after the reservation: %v; body %q", a.resp.StatusCode, a.at, b)
	}
	e.settled()
	if r := e.waitRow(a.resp.Header.Get("X-Request-Id")); r.status != "settled" || r.completion == 0 {
		t.Errorf("row %+v, want settled with the answer's tokens", r)
	}
}

// TestEarlyReservationOverspendRefused: another replica spends the team's
// balance after this gateway saw it; this gateway's next request goes to
// the engine on its stale view, and the ledger's refusal reaches the client
// as the 402 it would have been, with nothing held.
func TestEarlyReservationOverspendRefused(t *testing.T) {
	e := newEarlyStack(t)
	b := e.teamBalance()
	// What the others spent: all but a micro-credit.
	if _, err := e.stack.led.AddCredit(context.Background(), e.team, "spent-elsewhere", -(b.Balance - b.Reserved - 1), "test"); err != nil {
		t.Fatal(err)
	}
	resp, body := e.do(e.key, chatBody("llama-8b", true, 20))
	if resp.StatusCode != http.StatusPaymentRequired || !strings.Contains(body, "insufficient_balance") {
		t.Fatalf("status %d: %s; want 402 insufficient_balance", resp.StatusCode, body)
	}
	id := resp.Header.Get("X-Request-Id")
	if !e.log.dispatched(id, 0) {
		t.Errorf("the request did not go to the engine on the gateway's view")
	}
	e.settled()
	if r, err := e.ledgerRow(id); err == nil {
		t.Errorf("refused request left a row %+v", r)
	}
	if n := e.activeStreams(e.redis.Client(), 1); n != 0 {
		t.Errorf("%d stream slots still held", n)
	}
	// The refusal taught the gateway: the next request reserves first
	// and is refused before any engine sees it.
	resp, body = e.do(e.key, chatBody("llama-8b", true, 20))
	if resp.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("status %d: %s; want 402", resp.StatusCode, body)
	}
	if e.log.dispatched(resp.Header.Get("X-Request-Id"), 0) {
		t.Errorf("a request went to the engine after the ledger refused the team")
	}
}

// TestEarlyReservationRefusalsBeforeDispatch: a prompt the model's context
// cannot take is refused before any engine sees it, on a warm view too.
func TestEarlyReservationRefusalsBeforeDispatch(t *testing.T) {
	e := newEarlyStack(t)
	long := `{"model":"llama-8b","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat("llama ", 9000) + `"}]}`
	resp, body := e.do(e.key, long)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "context_length_exceeded") {
		t.Fatalf("status %d: %s; want 400 context_length_exceeded", resp.StatusCode, body)
	}
	if e.log.dispatched(resp.Header.Get("X-Request-Id"), 0) {
		t.Errorf("a request the context cannot take went to the engine")
	}
}

// TestEarlyReservationCap: a request without max_tokens, sent on a quote,
// asks its engine for exactly the cap the ledger reserved.
func TestEarlyReservationCap(t *testing.T) {
	e := newEarlyStack(t)
	g := newGate(t, true, nil)
	e.led.set(g)
	g.open()
	resp, body := e.do(e.key, `{"model":"llama-8b","messages":[{"role":"user","content":"hello"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if !waitClosed(g.sawDispatch, 0) {
		t.Fatal("the reservation did not run while the engine prefilled")
	}
	e.settled()
	var capTokens int64
	if err := e.db.QueryRowContext(t.Context(), "SELECT max_output_tokens FROM usage_ledger WHERE request_id = $1",
		resp.Header.Get("X-Request-Id")).Scan(&capTokens); err != nil {
		t.Fatal(err)
	}
	if want := int64(4096); capTokens != want {
		t.Errorf("reserved cap %d, want the model's %d", capTokens, want)
	}
	e.log.mu.Lock()
	sent := e.log.caps[resp.Header.Get("X-Request-Id")]
	e.log.mu.Unlock()
	if sent != capTokens {
		t.Errorf("the engine was asked for %d tokens, the ledger reserved %d", sent, capTokens)
	}
}

// teamBalance reads the team's balance.
func (e *earlyStack) teamBalance() ledger.Balance {
	e.t.Helper()
	b, err := e.stack.led.Balance(context.Background(), e.team)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}
