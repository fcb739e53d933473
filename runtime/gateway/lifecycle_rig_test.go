package gateway

import (
	"context"
	"errors"
	testingclock "k8s.io/utils/clock/testing"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
)

// lifecycleTimeout is the lifecycle gateway's ledger, first-token and idle
// timeout: short, for the cases that wait one out, and still far beyond
// what the other cases' simulated engine takes on a loaded machine.
const lifecycleTimeout = 3 * time.Second

// faultPoint is where a lifecycle case's fault strikes.
type faultPoint int

const (
	noFault    faultPoint = iota
	atReserve             // in the ledger's reservation
	atDispatch            // in the dispatch, before the engine answered
	atStream              // in the engine's stream, after streamFaultAfter events
)

// streamFaultAfter is how many events a faulty stream relays first: the
// answer has begun, with tokens to bill.
const streamFaultAfter = 4

// faultAct is what a fault does.
type faultAct int

const (
	actPanic faultAct = iota // panic, as a bug would
	actBlock                 // wait for the request's context to end: the client leaves, or a timer fires
	actFail                  // fail with the case's error
	actQueue                 // (dispatch) no capacity, every try: the request queues
)

// fault is one lifecycle case's fault, and its signals.
type fault struct {
	point faultPoint
	act   faultAct
	err   error
	// reached is closed when the fault strikes (actBlock, actQueue).
	reached chan struct{}
	once    sync.Once
}

func (f *fault) strike() { f.once.Do(func() { close(f.reached) }) }

// lifecycleRig wraps the ledger, the limiter and the dispatcher of one
// gateway: it injects the current case's fault and counts, per request,
// the settles and cancels and the stream slot's releases.
type lifecycleRig struct {
	Ledger
	limits Limiter
	disp   dispatch.Dispatcher

	mu       sync.Mutex
	fault    *fault
	ends     map[string]int // Settle and Cancel calls
	releases map[string]int // slot releases done (ReleaseStream, Finish with Release)
	// failFinish is how many Finish calls still fail, as when Redis is
	// slow.
	failFinish int
	admitted   map[string]string        // key's quota id → its last request id
	reserved   map[string]chan struct{} // closed once the request's reservation answered
}

func (r *lifecycleRig) current() *fault {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fault
}

func (r *lifecycleRig) count(m map[string]int, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m[id]++
}

// reservedSignal returns the channel closed once id's reservation answered.
func (r *lifecycleRig) reservedSignal(id string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reserved[id] == nil {
		r.reserved[id] = make(chan struct{})
	}
	return r.reserved[id]
}

func (r *lifecycleRig) Reserve(ctx context.Context, res ledger.Reservation) (ledger.Reserved, error) {
	defer close(r.reservedSignal(res.RequestID))
	if f := r.current(); f != nil && f.point == atReserve {
		if err := f.do(ctx); err != nil {
			return ledger.Reserved{}, err
		}
	}
	return r.Ledger.Reserve(ctx, res)
}

func (r *lifecycleRig) Settle(ctx context.Context, id string, u ledger.Usage, src ledger.Source) (ledger.Outcome, error) {
	r.count(r.ends, id)
	return r.Ledger.Settle(ctx, id, u, src)
}

func (r *lifecycleRig) Cancel(ctx context.Context, id string) (ledger.Outcome, error) {
	r.count(r.ends, id)
	return r.Ledger.Cancel(ctx, id)
}

func (r *lifecycleRig) Admit(ctx context.Context, keyID, requestID string, lim quota.KeyLimits) (quota.AdmitDecision, error) {
	r.mu.Lock()
	r.admitted[keyID] = requestID
	r.mu.Unlock()
	return r.limits.Admit(ctx, keyID, requestID, lim)
}

func (r *lifecycleRig) ReleaseStream(ctx context.Context, keyID, requestID string) error {
	err := r.limits.ReleaseStream(ctx, keyID, requestID)
	if err == nil {
		r.count(r.releases, requestID)
	}
	return err
}

func (r *lifecycleRig) CountTokens(ctx context.Context, keyID, requestID string, n int64) (bool, error) {
	return r.limits.CountTokens(ctx, keyID, requestID, n)
}

func (r *lifecycleRig) Finish(ctx context.Context, f quota.Finish) (quota.Finished, error) {
	r.mu.Lock()
	fail := r.failFinish > 0
	if fail {
		r.failFinish--
	}
	r.mu.Unlock()
	if fail {
		return quota.Finished{}, errors.New("redis: i/o timeout")
	}
	out, err := r.limits.Finish(ctx, f)
	if err == nil && f.Release {
		r.count(r.releases, f.RequestID)
	}
	return out, err
}

// rigDispatcher is the rig as the gateway's Dispatcher.
type rigDispatcher struct{ *lifecycleRig }

func (d rigDispatcher) Dispatch(ctx context.Context, job *dispatch.Job) (dispatch.Stream, error) {
	f := d.current()
	if f != nil && f.point == atDispatch {
		// The early reservation has answered: the row's state after the
		// ending does not depend on which came first.
		if !waitClosed(d.reservedSignal(job.RequestID), waitLimit) {
			return nil, errors.New("lifecycle test: the reservation never answered")
		}
		if err := f.do(ctx); err != nil {
			return nil, err
		}
	}
	st, err := d.disp.Dispatch(ctx, job)
	if err != nil || f == nil || f.point != atStream {
		return st, err
	}
	return &faultStream{Stream: st, ctx: ctx, f: f}, nil
}

// do acts out f on a request whose context is ctx.
func (f *fault) do(ctx context.Context) error {
	switch f.act {
	case actPanic:
		panic("lifecycle test: a bug")
	case actBlock:
		f.strike()
		<-ctx.Done()
		return context.Cause(ctx)
	case actQueue:
		f.strike()
		return dispatch.ErrNoCapacity
	default:
		return f.err
	}
}

// faultStream relays streamFaultAfter events, then acts out its fault.
type faultStream struct {
	dispatch.Stream
	ctx context.Context
	f   *fault
	n   int
}

func (s *faultStream) Recv() (dispatch.Event, error) {
	if s.n < streamFaultAfter {
		s.n++
		return s.Stream.Recv()
	}
	return dispatch.Event{}, s.f.do(s.ctx)
}

// newLifecycleStack is a stack whose gateway's ledger, limiter
// and dispatcher are the rig's, with lifecycleTimeout for its ledger,
// first-token and idle timeouts, and a view of balances that never ages (a
// test primes it to take the early path; TestBalanceView covers its TTL).
func newLifecycleStack(t *testing.T) (*stack, *lifecycleRig, *Server) {
	t.Helper()
	rig := &lifecycleRig{ends: map[string]int{}, releases: map[string]int{}, admitted: map[string]string{},
		reserved: map[string]chan struct{}{}}
	s := newStack(t, func(c *Config) {
		rig.Ledger, rig.limits, rig.disp = c.Ledger, c.Limits, c.Dispatcher
		c.Ledger, c.Limits, c.Dispatcher = rig, rig, rigDispatcher{rig}
		c.LedgerTimeout, c.FirstTokenTimeout, c.StreamIdleTimeout = lifecycleTimeout, lifecycleTimeout, lifecycleTimeout
	})
	s.gw.balances.clock = testingclock.NewFakePassiveClock(time.Now())
	return s, rig, s.gw
}

// counts returns how often id's row was settled or cancelled and its slot
// released.
func (r *lifecycleRig) counts(id string) (ends, releases int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ends[id], r.releases[id]
}

// checkQueueEmpty fails t when the model's queue holds an entry.
func checkQueueEmpty(t *testing.T, s *stack, model string) {
	t.Helper()
	q := quota.NewKeys(s.redis.Prefix).Queue(model)
	if n, err := s.redis.Client().ZCard(context.Background(), q).Result(); err != nil || n != 0 {
		t.Errorf("the model's queue holds %d entries (%v) after the request ended", n, err)
	}
}

// chunks is what a relay counts of n chunks of one short word each.
func chunks(n int64) ledger.Relayed {
	var r ledger.Relayed
	for range n {
		r.AddChunk(4, 1, 1, 0)
	}
	return r
}
