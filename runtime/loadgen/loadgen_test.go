package loadgen_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestMain(m *testing.M) {
	if code, ok := platformtest.Child(); ok {
		os.Exit(code)
	}
	testenv.MainWithLeakCheck(m)
}

// TestRunMeasuresEveryRequest: arrivals alternate between the targets and
// every request is timed: one TTFT each, one gap per content chunk after
// the first, and the usage's tokens equal what the engine generated.
func TestRunMeasuresEveryRequest(t *testing.T) {
	sim, url := platformtest.ServeSim(t, enginesim.Config{ServedModelName: "m", TimeScale: 20, Seed: 3})
	targets := []loadgen.Target{{Name: "a", URL: url, Model: "m"}, {Name: "b", URL: url, Model: "m"}}
	client := loadgen.NewClient()
	defer client.CloseIdleConnections()
	res, err := loadgen.Run(t.Context(), loadgen.Config{Targets: targets, Rate: 40, Duration: time.Second,
		Prompt: "Tell me about the sea.", MaxTokens: 20, Seed: 1, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	var requests int
	var tokens int64
	for _, r := range res {
		if r.Errors != 0 {
			t.Errorf("%s: %d errors, first %s", r.Name, r.Errors, r.FirstError)
		}
		if r.Requests == 0 || len(r.TTFT) != r.Requests {
			t.Errorf("%s: %d requests, %d TTFT samples; want one each", r.Name, r.Requests, len(r.TTFT))
		}
		if want := int(r.Chunks) - r.Requests; len(r.ITL) != want || r.Chunks > r.Tokens {
			t.Errorf("%s: %d gaps for %d chunks (%d tokens) in %d requests, want %d", r.Name, len(r.ITL), r.Chunks, r.Tokens, r.Requests, want)
		}
		if len(r.FirstToken) != r.Requests {
			t.Errorf("%s: %d requests by id, want %d", r.Name, len(r.FirstToken), r.Requests)
		}
		for id := range r.FirstToken {
			if !strings.HasPrefix(id, "req-"+r.Name+"-") {
				t.Errorf("%s: request id %q", r.Name, id)
			}
		}
		requests += r.Requests
		tokens += r.Tokens
	}
	if d := res[0].Requests - res[1].Requests; d < 0 || d > 1 {
		t.Errorf("arrivals split %d/%d, want alternating", res[0].Requests, res[1].Requests)
	}
	if requests < 20 || requests > 70 {
		t.Errorf("%d arrivals in 1 s at 40/s", requests)
	}
	if got := sim.Stats().GenerationTokens; got != tokens {
		t.Errorf("engine generated %d tokens, usage says %d", got, tokens)
	}
}

// TestRunEndsOnCancel: ending the context aborts the streams in flight
// and Run returns at once with them counted as errors.
func TestRunEndsOnCancel(t *testing.T) {
	sim, url := platformtest.ServeSim(t, enginesim.Config{ServedModelName: "m", TimeScale: 20})
	sim.SetFaults(enginesim.Faults{Hang: true})
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	client := loadgen.NewClient()
	defer client.CloseIdleConnections()
	start := time.Now()
	res, err := loadgen.Run(ctx, loadgen.Config{Targets: []loadgen.Target{{Name: "hang", URL: url, Model: "m"}},
		Rate: 20, Duration: time.Minute, Prompt: "hi", MaxTokens: 5, Client: client})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Run took %v after its context ended", took)
	}
	if res[0].Requests == 0 || res[0].Errors != res[0].Requests {
		t.Errorf("%d requests, %d errors; want every hung request to fail", res[0].Requests, res[0].Errors)
	}
}

func TestQuantile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}} {
		if got := loadgen.Quantile(ds, c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := loadgen.Quantile(nil, 0.5); got != 0 {
		t.Errorf("Quantile of nothing = %v", got)
	}
}
