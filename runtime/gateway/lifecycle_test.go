package gateway

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/openai"
)

// lifecycleState is where a case's request stands when it ends.
type lifecycleState int

const (
	inAdmitted  lifecycleState = iota // limits held, the reservation running (before the dispatch)
	inReserving                       // an early reservation running beside the dispatch
	inHeld                            // the row held, the dispatch or the queue running
	inStreaming                       // the answer streaming
)

// TestAdmissionLifecycle walks the request's states × its endings on the
// real ledger and Redis, and checks after each that the request's row
// settled or cancelled exactly once (or was never written), its stream
// slot was released exactly once, and the model's queue holds nothing of
// it. Cells that cannot happen are left out: no engine can die before the
// dispatch (admitted × engine dead), and nothing refuses a request whose
// answer began (streaming × refusal: an engine past its reservation is cut
// as a broken stream, usage_bound_test).
func TestAdmissionLifecycle(t *testing.T) {
	s, rig, gw := newLifecycleStack(t)
	// Each request's handler signals its return: what the test reads next
	// is all the request did, background work included (Wait).
	handled := make(chan struct{}, 1)
	h := gw.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { handled <- struct{}{} }()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	engineDead := &dispatch.Error{Status: http.StatusInternalServerError,
		Body: openai.NewError(openai.TypeServer, "engine_failed", "", "the engine died")}
	const (
		none      = "" // no row
		cancelled = "cancelled"
		partial   = "partial"
		exact     = "exact"
	)
	tests := []struct {
		name   string
		state  lifecycleState
		point  faultPoint
		act    faultAct
		err    error
		poor   bool // the team cannot pay: the ledger refuses
		stream bool
		leave  bool // the client leaves once the fault strikes
		// wantStatus is the client's status; 0 when it left.
		wantStatus int
		wantRow    string
		wantEnds   int // settles and cancels of the row
	}{
		{name: "admitted/refusal", state: inAdmitted, poor: true, wantStatus: http.StatusPaymentRequired, wantRow: none},
		{name: "admitted/client gone", state: inAdmitted, point: atReserve, act: actBlock, leave: true, wantRow: none, wantEnds: 1},
		{name: "admitted/timeout", state: inAdmitted, point: atReserve, act: actBlock, wantStatus: http.StatusServiceUnavailable, wantRow: none, wantEnds: 1},
		{name: "admitted/panic", state: inAdmitted, point: atReserve, act: actPanic, wantStatus: http.StatusInternalServerError, wantRow: none, wantEnds: 1},

		{name: "reserving/refusal", state: inReserving, poor: true, wantStatus: http.StatusPaymentRequired, wantRow: none},
		{name: "reserving/client gone", state: inReserving, point: atDispatch, act: actBlock, leave: true, wantRow: cancelled, wantEnds: 1},
		{name: "reserving/engine dead", state: inReserving, point: atDispatch, act: actFail, err: engineDead, wantStatus: http.StatusBadGateway, wantRow: cancelled, wantEnds: 1},
		{name: "reserving/timeout", state: inReserving, point: atDispatch, act: actBlock, wantStatus: http.StatusGatewayTimeout, wantRow: cancelled, wantEnds: 1},
		{name: "reserving/panic", state: inReserving, point: atDispatch, act: actPanic, wantStatus: http.StatusInternalServerError, wantRow: cancelled, wantEnds: 1},

		{name: "held/refusal", state: inHeld, point: atDispatch, act: actFail, err: dispatch.ErrNoHealthyNode, wantStatus: http.StatusServiceUnavailable, wantRow: cancelled, wantEnds: 1},
		{name: "held/client gone while queued", state: inHeld, point: atDispatch, act: actQueue, leave: true, wantRow: cancelled, wantEnds: 1},
		{name: "held/engine dead", state: inHeld, point: atDispatch, act: actFail, err: engineDead, wantStatus: http.StatusBadGateway, wantRow: cancelled, wantEnds: 1},
		{name: "held/timeout while queued", state: inHeld, point: atDispatch, act: actQueue, wantStatus: http.StatusGatewayTimeout, wantRow: cancelled, wantEnds: 1},
		{name: "held/panic", state: inHeld, point: atDispatch, act: actPanic, wantStatus: http.StatusInternalServerError, wantRow: cancelled, wantEnds: 1},

		{name: "streaming/client gone", state: inStreaming, point: atStream, act: actBlock, stream: true, leave: true, wantRow: partial, wantEnds: 1},
		{name: "streaming/engine dead", state: inStreaming, point: atStream, act: actFail, err: errors.New("engine died"), stream: true, wantStatus: http.StatusOK, wantRow: partial, wantEnds: 1},
		{name: "streaming/timeout", state: inStreaming, point: atStream, act: actBlock, stream: true, wantStatus: http.StatusOK, wantRow: partial, wantEnds: 1},
		{name: "streaming/panic", state: inStreaming, point: atStream, act: actPanic, stream: true, wantStatus: http.StatusOK, wantRow: partial, wantEnds: 1},
		{name: "streaming/completed", state: inStreaming, stream: true, wantStatus: http.StatusOK, wantRow: exact, wantEnds: 1},
		{name: "streaming/completed, not streamed", state: inStreaming, wantStatus: http.StatusOK, wantRow: exact, wantEnds: 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			credits := int64(1000 * credit)
			if tt.poor {
				credits = 0
			}
			team := s.team("lifecycle-"+itoa(int64(i)), credits)
			k, err := s.adm.CreateKey(context.Background(), adminwire.CreateKeyRequest{TeamID: team, MaxStreams: 1}, "", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if tt.state == inReserving {
				gw.balances.observe(team, 0, ledger.Reserved{Available: 1000 * credit}, nil)
			}
			f := &fault{point: tt.point, act: tt.act, err: tt.err, reached: make(chan struct{})}
			rig.mu.Lock()
			rig.fault = f
			rig.mu.Unlock()

			early := earlyReservations(t, gw.cfg.Metrics)
			ctx, leave := context.WithCancel(context.Background())
			defer leave()
			type answer struct {
				status int
				err    error
			}
			got := make(chan answer, 1)
			go func() {
				resp, err := s.post(ctx, srv.URL, k.Secret, chatBody("llama-8b", tt.stream, 200))
				if err != nil {
					got <- answer{err: err}
					return
				}
				defer resp.Body.Close()
				_, err = io.Copy(io.Discard, resp.Body)
				got <- answer{resp.StatusCode, err}
			}()
			if tt.leave {
				if !waitClosed(f.reached, waitLimit) {
					t.Fatal("the fault never struck")
				}
				leave()
			}
			var a answer
			select {
			case a = <-got:
			case <-time.After(time.Minute): // a bound for a hung test, not a speed claim
				t.Fatal("no answer")
			}
			if !waitClosed(handled, time.Minute) {
				t.Fatal("the handler did not return")
			}
			gw.Wait()
			if tt.leave {
				if a.err == nil {
					t.Errorf("the client left, yet read a whole answer (%d)", a.status)
				}
			} else if a.err != nil || a.status != tt.wantStatus {
				t.Errorf("answer %d (%v), want %d", a.status, a.err, tt.wantStatus)
			}

			// The request was where the case says when it ended.
			wantEarly := 0.0
			if tt.state == inReserving {
				wantEarly = 1
			}
			if got := earlyReservations(t, gw.cfg.Metrics) - early; got != wantEarly {
				t.Errorf("%v early reservations, want %v", got, wantEarly)
			}
			rig.mu.Lock()
			id := rig.admitted["key:"+itoa(k.ID)]
			rig.fault = nil
			rig.mu.Unlock()
			ends, releases := rig.counts(id)
			if id == "" {
				t.Fatal("the request was never admitted")
			}
			r, err := s.ledgerRow(id)
			switch {
			case tt.wantRow == none:
				if !errors.Is(err, sql.ErrNoRows) {
					t.Errorf("row %+v (%v), want none", r, err)
				}
			case err != nil:
				t.Errorf("row: %v, want %s", err, tt.wantRow)
			case tt.wantRow == cancelled:
				if r.status != "cancelled" {
					t.Errorf("row %+v, want cancelled", r)
				}
			default:
				if r.status != "settled" || r.from != tt.wantRow || r.completion == 0 {
					t.Errorf("row %+v, want settled %s with the tokens relayed", r, tt.wantRow)
				}
			}
			if ends != tt.wantEnds {
				t.Errorf("the row was settled or cancelled %d times, want %d", ends, tt.wantEnds)
			}
			if releases != 1 {
				t.Errorf("the stream slot was released %d times, want once", releases)
			}
			if n := s.activeStreams(s.redis.Client(), k.ID); n != 0 {
				t.Errorf("%d stream slots held after the request ended", n)
			}
			checkQueueEmpty(t, s, "llama-8b")
		})
	}
}

// earlyReservations is how many early reservations m has confirmed, held
// or refused.
func earlyReservations(t *testing.T, m *Metrics) float64 {
	t.Helper()
	var sum float64
	for _, result := range []string{"held", "refused"} {
		var d dto.Metric
		if err := m.early.WithLabelValues(result).Write(&d); err != nil {
			t.Fatal(err)
		}
		sum += d.GetCounter().GetValue()
	}
	return sum
}
