package engineclient

import (
	"context"
	"errors"
	"io"
	testingclock "k8s.io/utils/clock/testing"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/openai"
)

// TestDirectSendsTheDeclaredServedName: a target given by URL alone sends
// the served name the admin API declares for the model, which a third-party
// engine needs (it answers 404 to the platform's name); the table is cached
// and a failed reload keeps the last good one.
func TestDirectSendsTheDeclaredServedName(t *testing.T) {
	var body openai.ChatCompletionRequest
	srv := goldenEngine(t, "stream_include_usage.golden", &body)
	var loads atomic.Int64
	var fail atomic.Bool
	names := NewServedNames(func(context.Context) (map[string]string, error) {
		loads.Add(1)
		if fail.Load() {
			return nil, errors.New("store down")
		}
		return map[string]string{"llama-8b": "meta-llama/Llama-3.1-8B-Instruct"}, nil
	})
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	names.clock = clk
	d := NewDirect(map[string][]Target{
		"llama-8b": {{URL: srv.URL}},
		"other":    {{URL: srv.URL}},
	}, srv.Client())
	d.UseServedNames(names)
	send := func(model string) string {
		t.Helper()
		s, err := d.Dispatch(context.Background(), job(model, true))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, end := drain(t, s); !errors.Is(end, io.EOF) {
			t.Fatalf("end = %v, want io.EOF", end)
		}
		return body.Model
	}
	if got := send("llama-8b"); got != "meta-llama/Llama-3.1-8B-Instruct" {
		t.Errorf("engine saw model %q, want the declared served name", got)
	}
	if got := send("other"); got != "other" {
		t.Errorf("a model without a declared served name sent %q, want its own name", got)
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("%d loads within the cache's life, want 1", n)
	}
	fail.Store(true)
	clk.SetTime(clk.Now().Add(servedNamesTTL))
	if got := send("llama-8b"); got != "meta-llama/Llama-3.1-8B-Instruct" {
		t.Errorf("after a failed reload the engine saw %q, want the last good served name", got)
	}
	if n := loads.Load(); n != 2 {
		t.Errorf("%d loads after the cache expired, want 2", n)
	}
}
