package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/coldstart"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestWakeHold: a caller of a model at zero is held, not refused, until
// the model's first replica is ready, then served like any other request;
// the OpenAI SDKs' 10-minute timeout and retries make that the difference
// between an application that fails after two quick retries and one that
// is served once the model is up. A held caller keeps its key's stream
// slot (a key holds at most its concurrent streams), and gives it back
// when it leaves; a hold that passes is the 503 with Retry-After; a
// caller past the hold's memory budget gets that 503 at once.
func TestWakeHold(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	clock := testingclock.NewFakeClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	board, err := coldstart.New(s.redis.Client(), s.redis.Prefix, clock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The first model is woken by the first part; the others use the
	// second, which stays at zero (a model found serving is taken as
	// serving for a second without asking).
	const woken, model = "qwen-32b", "llama-8b"
	verdict := keepPublishing(t, board, woken)
	keepPublishing(t, board, model)
	reg := prometheus.NewRegistry()
	long := s.gateway(func(c *gateway.Config) {
		c.ColdStarts, c.WakeHold, c.Metrics = board, 10*time.Minute, gateway.NewMetrics(reg)
	})
	// heldNow waits until the long-hold gateway holds n callers of model.
	heldNow := func(model string, n int) {
		t.Helper()
		testenv.EventuallyNil(t, time.Minute, fmt.Sprintf("%d callers held", n), func() error {
			if got := gaugeValue(t, reg, "llmplat_gateway_wake_held", model); got != float64(n) {
				return fmt.Errorf("%v held", got)
			}
			return nil
		})
	}

	// held reports nil when key's stream slots are all taken: a request
	// on it is refused 429 for its concurrent streams.
	held := func(url, key, model string) func() error {
		return func() error {
			resp, err := s.post(ctx, url, key, chatBody(model, true, 5))
			if err != nil {
				return err
			}
			if body := readAll(t, resp); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "concurrency_limit_exceeded") {
				return fmt.Errorf("a request past the key's streams got %d %s, want 429 while its streams are held", resp.StatusCode, body)
			}
			return nil
		}
	}

	t.Run("held until the model is ready, then served", func(t *testing.T) {
		const callers = 3
		key := s.key(adminwire.CreateKeyRequest{TeamID: team, MaxStreams: callers})
		type answer struct {
			status int
			body   string
			err    error
		}
		answers := make(chan answer, callers)
		var wg sync.WaitGroup
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := s.post(ctx, long, key, chatBody(woken, true, 5))
				if err != nil {
					answers <- answer{err: err}
					return
				}
				answers <- answer{status: resp.StatusCode, body: readAll(t, resp)}
			}()
		}
		heldNow(woken, callers)
		if err := held(long, key, woken)(); err != nil {
			t.Error(err)
		}
		if n, err := board.Held(ctx, woken); err != nil || n != 1 {
			t.Errorf("held demand %d (%v), want the key's one caller", n, err)
		}
		select {
		case a := <-answers:
			t.Fatalf("a caller was answered while the model was at zero: %d %s %v", a.status, a.body, a.err)
		default:
		}
		verdict.Store(int32(coldstart.Ready))
		wg.Wait()
		close(answers)
		for a := range answers {
			if a.err != nil || a.status != http.StatusOK || !strings.HasSuffix(strings.TrimSpace(a.body), "data: [DONE]") {
				t.Errorf("a held caller once the model was ready: %d %q %v; want its whole stream", a.status, a.body, a.err)
			}
		}
		verdict.Store(int32(coldstart.Zero))
	})

	t.Run("a caller that leaves gives its slot back", func(t *testing.T) {
		key := s.key(adminwire.CreateKeyRequest{TeamID: team, MaxStreams: 1})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := s.post(rctx, long, key, chatBody(model, true, 5)); err == nil {
				readAll(t, resp)
				t.Errorf("the leaving caller was answered %d", resp.StatusCode)
			}
		}()
		heldNow(model, 1)
		if err := held(long, key, model)(); err != nil {
			t.Error(err)
		}
		cancel()
		<-done
		testenv.EventuallyNil(t, time.Minute, "the slot given back", func() error {
			tctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			resp, err := s.post(tctx, long, key, chatBody(model, true, 5))
			if errors.Is(err, context.DeadlineExceeded) {
				return nil // held on the slot the caller gave back
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("the next caller got %d %s, want held", resp.StatusCode, readAll(t, resp))
		})
	})

	t.Run("a hold that passes is a 503 with Retry-After", func(t *testing.T) {
		const hold = 300 * time.Millisecond
		url := s.gateway(func(c *gateway.Config) { c.ColdStarts, c.WakeHold = board, hold })
		key := s.key(adminwire.CreateKeyRequest{TeamID: team})
		start := time.Now()
		resp, err := s.post(ctx, url, key, chatBody(model, true, 5))
		if err != nil {
			t.Fatal(err)
		}
		checkError(t, resp, readAll(t, resp), errorCase{Status: http.StatusServiceUnavailable,
			Typ: openai.TypeUnavailable, Code: "model_loading", RetryAfter: true})
		if took := time.Since(start); took < hold {
			t.Errorf("answered after %v, before the hold (%v) passed", took, hold)
		}
	})

	t.Run("past the hold's budget, the 503 at once", func(t *testing.T) {
		url := s.gateway(func(c *gateway.Config) { c.ColdStarts, c.WakeHold, c.WakeHoldBudget = board, 10*time.Minute, 1 })
		key := s.key(adminwire.CreateKeyRequest{TeamID: team})
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		resp, err := s.post(rctx, url, key, chatBody(model, false, 5))
		if err != nil {
			t.Fatalf("no answer (%v): the caller was held past the budget", err)
		}
		checkError(t, resp, readAll(t, resp), errorCase{Status: http.StatusServiceUnavailable,
			Typ: openai.TypeUnavailable, Code: "model_loading", RetryAfter: true})
	})
}

// keepPublishing publishes, as an orchestrator does every second, its
// verdict on model (Zero until the test stores another) until the test
// ends: a published state lasts coldstart.StateTTL.
func keepPublishing(t *testing.T, board *coldstart.Board, model string) *atomic.Int32 {
	t.Helper()
	var verdict atomic.Int32
	publish := func() error {
		return board.Publish(context.Background(), "orch-1", model, coldstart.Verdict(verdict.Load()), 12*time.Minute)
	}
	if err := publish(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(coldstart.StateTTL / 10):
			}
			_ = publish()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return &verdict
}

// gaugeValue is the value of the gauge name of model on reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name, model string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "model" && l.GetValue() == model {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}
