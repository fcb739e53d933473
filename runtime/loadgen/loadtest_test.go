package loadgen_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// TestLoadBurstAndRate: a burst sends exactly its requests, each timed
// and its tokens counted, the mix split by model; a rate with a cap on
// concurrency never has more in flight than the cap; a model the engine
// does not serve is counted as its HTTP status.
func TestLoadBurstAndRate(t *testing.T) {
	_, url := platformtest.ServeSim(t, enginesim.Config{ServedModelName: "m", TimeScale: 50, Seed: 3})
	ctx := context.Background()
	rep, err := loadgen.Load(ctx, loadgen.Plan{BaseURL: url + "/v1", Models: []loadgen.Weighted{{Model: "m", Weight: 3}, {Model: "nope", Weight: 1}},
		Burst: 80, PromptTokens: 50, MaxTokens: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, nope := rep.Models["m"], rep.Models["nope"]
	if rep.Overall.Requests != 80 || m.Requests+nope.Requests != 80 || m.Requests < 40 || nope.Requests < 5 {
		t.Fatalf("requests: all %d, m %d, nope %d; want 80 split about 3:1", rep.Overall.Requests, m.Requests, nope.Requests)
	}
	if m.OK != m.Requests || len(m.Errors) != 0 || m.CompletionTokens != int64(8*m.Requests) || m.TTFT.P50 <= 0 || m.TTFT.P99 < m.TTFT.P50 {
		t.Fatalf("served model: %+v", m)
	}
	if nope.OK != 0 || nope.Errors["404"] != nope.Requests {
		t.Fatalf("unknown model: %+v, want every request a 404", nope)
	}

	maxInFlight := 0
	rep, err = loadgen.Load(ctx, loadgen.Plan{BaseURL: url, Models: []loadgen.Weighted{{Model: "m", Weight: 1}},
		Rate: 200, Duration: 2 * time.Second, Concurrency: 5, PromptTokens: 10, MaxTokens: 4, Seed: 2,
		Progress: func(p loadgen.Progress) { maxInFlight = max(maxInFlight, p.InFlight) }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Overall.Requests == 0 || rep.Overall.OK != rep.Overall.Requests || maxInFlight > 5 {
		t.Fatalf("rate with a cap: %+v, at most %d in flight seen; want all answered, ≤ 5 in flight", rep.Overall, maxInFlight)
	}
	if _, err := loadgen.ParseMix("a:1,b:x"); err == nil {
		t.Fatal("a mix with a bad weight was accepted")
	}
	if mix, err := loadgen.ParseMix("llama-8b:8, qwen-32b:1.5,llama-70b"); err != nil || len(mix) != 3 || mix[2].Weight != 1 {
		t.Fatalf("ParseMix = %+v, %v", mix, err)
	}
}

// TestLoadOnDone: every request is reported as it ends, in order of its
// times; a refusal is a *StatusError with its status and Retry-After.
func TestLoadOnDone(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"model":"busy"`) {
			w.Header().Set("Retry-After", "7")
			http.Error(w, `{"error":{"message":"busy","type":"service_unavailable_error","param":null,"code":"no_capacity"}}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n"))
	}))
	defer srv.Close()
	var mu sync.Mutex
	var done []loadgen.Finished
	rep, err := loadgen.Load(context.Background(), loadgen.Plan{BaseURL: srv.URL, Models: []loadgen.Weighted{{Model: "m", Weight: 1}, {Model: "busy", Weight: 1}},
		Burst: 20, MaxTokens: 4, Seed: 1, Client: srv.Client(),
		OnDone: func(f loadgen.Finished) { mu.Lock(); done = append(done, f); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 20 || rep.Models["busy"].Errors["503"] != rep.Models["busy"].Requests {
		t.Fatalf("%d requests reported, busy %+v; want 20, every busy one a 503", len(done), rep.Models["busy"])
	}
	for _, f := range done {
		var refused *loadgen.StatusError
		switch {
		case f.Model == "busy" && (!errors.As(f.Err, &refused) || refused.Status != 503 || refused.RetryAfter != "7" || !f.FirstToken.IsZero()):
			t.Errorf("busy: %+v (%v), want a 503 with Retry-After 7 and no first token", f, f.Err)
		case f.Model == "m" && (f.Err != nil || f.FirstToken.Before(f.Sent) || f.Ended.Before(f.FirstToken)):
			t.Errorf("m: %+v, want a whole stream, sent ≤ first token ≤ ended", f)
		}
	}
}

// TestLoadIgnoreEOS: answers asked to ignore the end of sequence run to
// their cap, where the engine's natural answers (400 tokens on average)
// mostly end before it.
func TestLoadIgnoreEOS(t *testing.T) {
	_, url := platformtest.ServeSim(t, enginesim.Config{ServedModelName: "m", TimeScale: 50, Seed: 3})
	rep, err := loadgen.Load(context.Background(), loadgen.Plan{BaseURL: url, Models: []loadgen.Weighted{{Model: "m", Weight: 1}},
		Burst: 4, PromptTokens: 10, MaxTokens: 1500, IgnoreEOS: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if m := rep.Models["m"]; m.OK != 4 || m.CompletionTokens != 4*1500 {
		t.Fatalf("%+v, want 4 answers of 1,500 tokens", m)
	}
}

// TestLoadStop: closing Stop ends an hour's arrivals early, and the
// requests in flight finish rather than being cut.
func TestLoadStop(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n"))
	}))
	defer srv.Close()
	stop := make(chan struct{})
	var once sync.Once
	rep, err := loadgen.Load(context.Background(), loadgen.Plan{BaseURL: srv.URL, Models: []loadgen.Weighted{{Model: "m", Weight: 1}},
		Rate: 1000, Duration: time.Hour, Concurrency: 2, MaxTokens: 4, Client: srv.Client(), Stop: stop,
		OnDone: func(loadgen.Finished) { once.Do(func() { close(stop) }) }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Overall.Requests == 0 || rep.Overall.OK != rep.Overall.Requests {
		t.Fatalf("%+v, want every request answered in full", rep.Overall)
	}
}
