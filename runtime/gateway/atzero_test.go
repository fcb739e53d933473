package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/coldstart"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/openai"
)

// TestModelAtZero: while the orchestrators report qwen-32b at zero, every
// caller is answered, once its hold passes (a short one here: the hold
// itself is TestWakeHold's), with 503 in the OpenAI shape and a
// Retry-After of the expected load less what the wake has run; the
// refusals hold nothing (no ledger row, no reserved credit, no stream
// slot: the key's one slot serves the next request), each counts as one
// of the key's requests per minute, as every request does, and the
// caller's demand is held. Once a replica is ready the same key is served.
func TestModelAtZero(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	const rpm = 10
	key := s.key(adminwire.CreateKeyRequest{TeamID: team, RPM: rpm, MaxStreams: 1})
	clock := testingclock.NewFakeClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	board, err := coldstart.New(s.redis.Client(), s.redis.Prefix, clock)
	if err != nil {
		t.Fatal(err)
	}
	url := s.gateway(func(c *gateway.Config) { c.ColdStarts, c.WakeHold = board, shortHold })
	ctx := context.Background()
	const load = 12 * time.Minute
	for i, step := range []struct {
		name    string
		advance time.Duration
		want    int // Retry-After, seconds
	}{
		{"first caller", 0, 720},
		{"three minutes into the wake", 3 * time.Minute, 540},
		{"ten minutes into the wake", 7 * time.Minute, 120},
	} {
		t.Run(step.name, func(t *testing.T) {
			clock.Step(step.advance)
			if err := board.Publish(ctx, "orch-1", "qwen-32b", coldstart.Zero, load); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			resp, err := s.post(ctx, url, key, chatBody("qwen-32b", true, 5))
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			checkError(t, resp, body, errorCase{Status: http.StatusServiceUnavailable,
				Typ: openai.TypeUnavailable, Code: "model_loading", RetryAfter: true})
			if got, _ := strconv.Atoi(resp.Header.Get("Retry-After")); got != step.want {
				t.Errorf("Retry-After %d s, want %d", got, step.want)
			}
			if got, want := resp.Header.Get("X-Ratelimit-Remaining-Requests"), strconv.Itoa(rpm-1-i); got != want {
				t.Errorf("requests left this minute %q, want %s: the refusal is one of the key's requests", got, want)
			}
			if waited := time.Since(start); waited >= gateway.DefaultQueueLimit {
				t.Errorf("the refusal took %v: it queued", waited)
			}
		})
	}
	s.settled()
	var rows int
	var reserved int64
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM usage_ledger").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRowContext(ctx, "SELECT reserved_microcredits FROM teams WHERE id = $1", team).Scan(&reserved); err != nil {
		t.Fatal(err)
	}
	if rows != 0 || reserved != 0 {
		t.Errorf("after refusals at zero: %d ledger rows, %d micro-credits reserved; want none", rows, reserved)
	}
	if held, err := board.Held(ctx, "qwen-32b"); err != nil || held != 1 {
		t.Errorf("held demand %d (%v), want the one caller", held, err)
	}

	if err := board.Publish(ctx, "orch-1", "qwen-32b", coldstart.Ready, load); err != nil {
		t.Fatal(err)
	}
	resp, err := s.post(ctx, url, key, chatBody("qwen-32b", false, 5))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK {
		t.Errorf("with a replica ready: %d %s; want 200 on the key's one stream slot", resp.StatusCode, body)
	}
	if held, err := board.Held(ctx, "qwen-32b"); err != nil || held != 0 {
		t.Errorf("held demand %d (%v) once a replica is ready, want 0", held, err)
	}
}

// shortHold is the wake hold of the tests of what a caller of a model at
// zero is answered once its hold passed.
const shortHold = 50 * time.Millisecond

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// countingColdStarts counts the record's reads.
type countingColdStarts struct {
	gateway.ColdStarts
	calls atomic.Int64
}

func (c *countingColdStarts) AtZero(ctx context.Context, model string) (bool, error) {
	c.calls.Add(1)
	return c.ColdStarts.AtZero(ctx, model)
}

func (c *countingColdStarts) Refuse(ctx context.Context, model, caller string) (time.Duration, bool, error) {
	c.calls.Add(1)
	return c.ColdStarts.Refuse(ctx, model, caller)
}

// TestAtZeroHoldsOnlyCallersAdmissionWouldAdmit: a caller of a model at
// zero is the model's demand (which keeps the wake signal up for up to
// coldstart.MaxHold) only when admission would take it. A team without
// credit gets the ledger's 402, as on a running model, and a key past its
// requests per minute its 429; neither is held. A caller with credit is.
func TestAtZeroHoldsOnlyCallersAdmissionWouldAdmit(t *testing.T) {
	s := newStack(t, stackOpts{})
	broke := s.key(adminwire.CreateKeyRequest{TeamID: s.team("broke", 0)})
	paying := s.team("paying", 10*credit)
	limited := s.key(adminwire.CreateKeyRequest{TeamID: paying, RPM: 1})
	board, err := coldstart.New(s.redis.Client(), s.redis.Prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	url := s.gateway(func(c *gateway.Config) { c.ColdStarts, c.WakeHold = board, shortHold })
	ctx := context.Background()
	if err := board.Publish(ctx, "orch-1", "qwen-32b", coldstart.Zero, 12*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name     string
		key      string
		want     errorCase
		wantHeld int64
	}{
		{"a team without credit", broke, errorCase{Status: http.StatusPaymentRequired, Typ: openai.TypeInsufficient, Code: "insufficient_balance"}, 0},
		{"a key's one request a minute", limited, errorCase{Status: http.StatusServiceUnavailable, Typ: openai.TypeUnavailable, Code: "model_loading", RetryAfter: true}, 1},
		{"the same key past its minute", limited, errorCase{Status: http.StatusTooManyRequests, Typ: openai.TypeRateLimit, Code: "rate_limit_exceeded", RetryAfter: true}, 1},
	} {
		t.Run(step.name, func(t *testing.T) {
			resp, err := s.post(ctx, url, step.key, chatBody("qwen-32b", true, 5))
			if err != nil {
				t.Fatal(err)
			}
			checkError(t, resp, readAll(t, resp), step.want)
			if held, err := board.Held(ctx, "qwen-32b"); err != nil || held != step.wantHeld {
				t.Errorf("held demand %d (%v), want %d", held, err, step.wantHeld)
			}
		})
	}
}

// TestServingModelSkipsTheRecord: a model the record finds serving is not
// asked about again for servingRecheck, so its requests pay no Redis round
// trip each. However slow the machine, the reads stay within one per
// servingRecheck of the loop's time, plus the first.
func TestServingModelSkipsTheRecord(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	board, err := coldstart.New(s.redis.Client(), s.redis.Prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	counting := &countingColdStarts{ColdStarts: board}
	url := s.gateway(func(c *gateway.Config) { c.ColdStarts = counting })
	ctx := context.Background()
	if err := board.Publish(ctx, "orch-1", "llama-8b", coldstart.Ready, time.Minute); err != nil {
		t.Fatal(err)
	}
	const n = 20
	start := time.Now()
	for i := range n {
		resp, err := s.post(ctx, url, key, chatBody("llama-8b", false, 5))
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	elapsed := time.Since(start)
	if calls, most := counting.calls.Load(), int64(elapsed/gateway.ServingRecheck)+1; calls > most {
		t.Errorf("%d requests in %v read the cold-start record %d times, want at most %d", n, elapsed, calls, most)
	}
}
