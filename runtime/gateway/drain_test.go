package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestDrainKeepsServingWithHealthFailed: a gateway told to stop (its
// context ends, as at SIGTERM) answers /healthz 503 at once, so the NLB's
// health check takes it out, but for its drain delay it goes on serving:
// a completion on a new connection and one on a connection opened before
// the drain both succeed, and /livez stays 200 so the kubelet does not
// restart it. Serve returns only after the delay (issue 43: rollouts
// refused connections the NLB still sent for minutes after
// deregistration).
func TestDrainKeepsServingWithHealthFailed(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	key := s.key(adminwire.CreateKeyRequest{TeamID: team})
	const delay = 2 * time.Minute
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	var cfg gateway.Config
	s.gateway(func(c *gateway.Config) { cfg = *c })
	// Served by Serve, so that the test ends its context.
	cfg.DrainDelay, cfg.Clock = delay, clk
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- gw.Serve(serveCtx, ln) }()
	base := "http://" + ln.Addr().String()

	// old is a client whose one connection is opened before the drain.
	old := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer old.CloseIdleConnections()
	get := func(c *http.Client, path string) (int, error) {
		resp, err := c.Get(base + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	if code, err := get(old, "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("healthz before the drain = %d, %v; want 200", code, err)
	}

	stop() // SIGTERM
	testenv.EventuallyNil(t, 10*time.Second, "healthz answers 503 once the gateway drains", func() error {
		if code, err := get(http.DefaultClient, "/healthz"); err != nil || code != http.StatusServiceUnavailable {
			return fmt.Errorf("healthz = %d, %v; want 503", code, err)
		}
		return nil
	})
	if code, err := get(http.DefaultClient, "/livez"); err != nil || code != http.StatusOK {
		t.Errorf("livez while draining = %d, %v; want 200 (a draining gateway is alive)", code, err)
	}
	body := `{"model":"llama-8b","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for name, c := range map[string]*http.Client{"new connection": fresh, "connection opened before the drain": old} {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("%s: a completion while draining failed: %v", name, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: a completion while draining = %d %s; want 200", name, resp.StatusCode, b)
		}
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned before its drain delay: %v", err)
	default:
	}
	clk.Step(delay)
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(gateway.ShutdownBudget + 10*time.Second):
		t.Fatal("Serve did not return after its drain delay and shutdown budget")
	}
	gw.Wait()
}
