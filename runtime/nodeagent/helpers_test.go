package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(simProcessEnv); cfg != "" {
		os.Exit(simProcessMain(cfg)) // a child of TestEngineInAnotherProcess
	}
	goleak.VerifyTestMain(m)
}

// waitFor bounds every wait of a test: generous for a loaded machine.
const waitFor = 10 * time.Second

// testModel is the one model the test agent serves.
const testModel = "llama-8b"

// engine is what an agent needs to know of its engine.
type engine struct {
	url, served string
	maxModelLen int64
}

// newSim starts a simulator that runs faster than real time, served over
// HTTP, until the test ends.
func newSim(t *testing.T) (*enginesim.Sim, engine) {
	t.Helper()
	sim, err := enginesim.New(enginesim.Config{TimeScale: 10, Seed: 7, MeanAnswerTokens: 4000})
	if err != nil {
		t.Fatalf("enginesim.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sim.Run(ctx)
	}()
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
	})
	return sim, engine{url: srv.URL, served: sim.ServedModelName(), maxModelLen: sim.MaxModelLen()}
}

// runningAgent is an agent started by startAgent.
type runningAgent struct {
	a *Agent
	// res receives Run's result.
	res <-chan error
	// stop cancels Run; the test then reads res itself.
	stop func()
}

// startAgent runs an agent against fs and eng until the test ends; edit,
// if any, changes its config first.
func startAgent(t *testing.T, fs *fakeServer, eng engine, edit ...func(*Config)) runningAgent {
	t.Helper()
	cfg := Config{
		ServerURL: fs.url(),
		NodeID:    "node-test-1",
		Token:     "nt_secret",
		EngineURL: eng.url,
		Models: []nodeproto.Model{{Name: testModel, ServedName: eng.served,
			MaxNumSeqs: 64, MaxModelLen: int(eng.maxModelLen), KVCapacityTokens: 100000}},
		Rand: rand.NewPCG(1, 2),
		// No GPU telemetry unless a test asks: the machine's own tool
		// must not decide a test's outcome.
		GPUQuery: func(context.Context) ([]byte, error) { return nil, errors.New("no gpu") },
	}
	for _, e := range edit {
		e(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- a.Run(ctx) }()
	stopped := false
	t.Cleanup(func() {
		cancel()
		if !stopped {
			if err := waitRun(res); err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	})
	return runningAgent{a: a, res: res, stop: func() { cancel(); stopped = true }}
}

// waitRun waits for Run's result.
func waitRun(res <-chan error) error {
	select {
	case err := <-res:
		return err
	case <-time.After(waitFor):
		return errors.New("Run did not return")
	}
}

// assignFrame asks for a streamed completion of exactly maxTokens tokens.
func assignFrame(id, model, served string, maxTokens int) *nodeproto.Assign {
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Tell me a long story about ships."}],"max_tokens":%d,"ignore_eos":true}`, served, maxTokens)
	return &nodeproto.Assign{RequestID: id, Model: model, Body: []byte(body)}
}
