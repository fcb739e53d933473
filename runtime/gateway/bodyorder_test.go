package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// answerWait bounds the wait for an answer the gateway gives without the
// body: past the gateway's drainTimeout (10 s) by far more than a loaded
// machine's round trip, below its body read timeout (60 s).
const answerWait = 45 * time.Second

// openBody starts a request whose body, of the announced length, the test
// sends nothing of until it closes the returned writer; the response
// arrives on the channel.
func openBody(t *testing.T, url, key string, length int64) (*io.PipeWriter, <-chan *http.Response) {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	got := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- nil
			return
		}
		got <- resp
	}()
	t.Cleanup(func() { _ = pw.Close() })
	return pw, got
}

// await returns the response within answerWait, or fails the test.
func await(t *testing.T, got <-chan *http.Response, what string) *http.Response {
	t.Helper()
	select {
	case resp := <-got:
		if resp == nil {
			t.Fatalf("%s: the request failed", what)
		}
		return resp
	case <-time.After(answerWait):
		t.Fatalf("%s: no answer in %v while the body was not sent", what, answerWait)
		return nil
	}
}

// TestRefusedKeyIsAnsweredWithoutItsBody: a key over its requests per
// minute is refused before its body is read, however large the body
// announces itself: the 429 comes while not one byte of the body was sent
// (the gateway waits drainTimeout for it, to let a client still sending
// read the answer, then closes the connection; answerWait is longer).
func TestRefusedKeyIsAnsweredWithoutItsBody(t *testing.T) {
	s := newStack(t, stackOpts{})
	key := s.key(adminwire.CreateKeyRequest{TeamID: s.team("alpha", 10*credit), RPM: 1})
	url := s.gateway(nil)
	ctx := context.Background()
	resp, err := s.post(ctx, url, key, chatBody("llama-8b", false, 5))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK {
		t.Fatalf("the key's one request a minute: %d %s", resp.StatusCode, body)
	}
	_, got := openBody(t, url, key, gateway.MaxBodyBytes)
	resp = await(t, got, "a key past its minute")
	checkError(t, resp, readAll(t, resp), errorCase{Status: http.StatusTooManyRequests,
		Typ: openai.TypeRateLimit, Code: "rate_limit_exceeded", RetryAfter: true})
}

// TestBodyBudgetFull: while large bodies hold the gateway's body budget, a
// further large body waits the budget's wait and is answered 503
// server_busy with Retry-After; a small request of another team is served
// meanwhile from the reserve kept for small bodies; and once the large
// body is gone the budget is whole again.
func TestBodyBudgetFull(t *testing.T) {
	s := newStack(t, stackOpts{})
	const budget = 4 << 20
	reg := prometheus.NewRegistry()
	url := s.gateway(func(c *gateway.Config) {
		c.BodyBudget, c.BodyWait = budget, 200*time.Millisecond
		c.Metrics = gateway.NewMetrics(reg)
	})
	heavy := s.key(adminwire.CreateKeyRequest{TeamID: s.team("heavy", 10*credit)})
	light := s.key(adminwire.CreateKeyRequest{TeamID: s.team("light", 10*credit)})
	inUse := func() float64 {
		n, err := testutil.GatherAndCount(reg, "llmplat_gateway_body_budget_bytes")
		if err != nil || n != 1 {
			t.Fatalf("the body budget's gauge: %d series, %v", n, err)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "llmplat_gateway_body_budget_bytes" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return 0
	}

	// A 2 MiB body, announced and not sent: its weight (6 MiB, more than
	// the large bodies' share) is taken alone before its bytes arrive.
	holder, holderAnswer := openBody(t, url, heavy, 2<<20)
	testenv.EventuallyNil(t, answerWait, "the first large body to hold the budget", func() error {
		if v := inUse(); v < 3*(2<<20) {
			return fmt.Errorf("in use %v", v)
		}
		return nil
	})

	_, got := openBody(t, url, heavy, 128<<10)
	resp := await(t, got, "a second large body")
	checkError(t, resp, readAll(t, resp), errorCase{Status: http.StatusServiceUnavailable,
		Typ: openai.TypeUnavailable, Code: "server_busy", RetryAfter: true})
	if ra := resp.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}

	resp, err := s.post(context.Background(), url, light, chatBody("llama-8b", false, 5))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK {
		t.Errorf("another team's small request beside a full budget: %d %s", resp.StatusCode, body)
	}

	// The held body arrives at last, and is no JSON: a 400, and its
	// weight is given back.
	go func() {
		_, _ = holder.Write(bytes.Repeat([]byte("x"), 2<<20))
		_ = holder.Close()
	}()
	if resp := await(t, holderAnswer, "the held body, sent at last"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body that is no JSON: %d, want 400", resp.StatusCode)
	} else {
		readAll(t, resp)
	}
	testenv.EventuallyNil(t, answerWait, "the budget given back", func() error {
		if v := inUse(); v != 0 {
			return fmt.Errorf("in use %v", v)
		}
		return nil
	})
}
