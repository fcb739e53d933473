package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestMain(m *testing.M) { testenv.MainWithLeakCheck(m) }

// commandWait bounds a test's wait for a command to start or for what it
// serves to show a request: a second alone, with room for a loaded machine.
const commandWait = 30 * time.Second

// startEngine serves a simulated llama-8b, 100 times faster than real
// time, until the test ends.
func startEngine(t testing.TB) (*enginesim.Sim, *httptest.Server) {
	t.Helper()
	dep, err := enginesim.Profile("llama-8b")
	if err != nil {
		t.Fatal(err)
	}
	sim, err := enginesim.New(enginesim.Config{Deployment: dep, ServedModelName: "llama-8b", TimeScale: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	eng := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { eng.Close(); stop(); <-done })
	return sim, eng
}

// TestGatewayCommand runs `llmplat gateway` as production would, on real
// PostgreSQL and Redis in front of a simulated engine: the admin API
// (opened by the bootstrap token from the environment) declares a model,
// a team, credit and a key, and the key streams a completion.
func TestGatewayCommand(t *testing.T) {
	_, eng := startEngine(t)

	const adminToken = "llpadm_0123456789abcdefghijABCDEFGHIJ0123456789abc"
	t.Setenv("LLMPLAT_ADMIN_TOKEN", adminToken)
	rds := testenv.Redis(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- runGateway(ctx, []string{"-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0",
			"-database-url", testenv.Postgres(t), "-redis-url", rds.URL, "-redis-prefix", rds.Prefix,
			"-engine", "llama-8b=" + eng.URL + "@8"}, out)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway returned %v", err)
		}
	})
	var base string
	testenv.EventuallyNil(t, commandWait, "the gateway to print where it serves", func() error {
		printed := out.String()
		_, rest, ok := strings.Cut(printed, "serving ")
		if !ok {
			return fmt.Errorf("it printed %q", printed)
		}
		base, _, _ = strings.Cut(rest, " ")
		return nil
	})

	cl, err := adminclient.NewClient(base, adminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := bootstrapKey(ctx, t, cl)
	if status, body, tokens := complete(ctx, t, base, key); status != 200 || tokens == 0 {
		t.Fatalf("completion: %d %s", status, body)
	}

	// Metrics are served on their own listener, with bounded labels.
	_, rest, _ := strings.Cut(out.String(), "(metrics ")
	metricsURL, _, _ := strings.Cut(rest, ")")
	wants := []string{`llmplat_gateway_settled_microcredits_total{model="llama-8b",team="alpha"}`,
		`llmplat_gateway_requests_total{model="llama-8b",outcome="completed"} 1`, "go_goroutines"}
	// The settle runs after the response, so its counter may come a moment
	// later.
	testenv.EventuallyNil(t, commandWait, "the request's and the settle's metrics", func() error {
		mresp, err := http.Get(metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(mresp.Body)
		mresp.Body.Close()
		var missing []string
		for _, want := range wants {
			if !strings.Contains(string(metrics), want) {
				missing = append(missing, want)
			}
		}
		if len(missing) != 0 {
			return fmt.Errorf("metrics lack %s", strings.Join(missing, ", "))
		}
		return nil
	})
	http.DefaultClient.CloseIdleConnections()
}
