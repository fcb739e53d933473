package loadgen_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/loadgen"
)

// TestClosedLoop: each target's answers and failures are counted apart,
// the first failure is said, and the workers share the target's keys.
func TestClosedLoop(t *testing.T) {
	var mu sync.Mutex
	keys := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys[r.Header.Get("Authorization")]++
		mu.Unlock()
		if r.URL.Path == "/refuse/v1/chat/completions" {
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		_, _ = w.Write([]byte(`{"choices":[]}`))
	}))
	defer srv.Close()
	client := srv.Client()
	res := loadgen.ClosedLoop(context.Background(), loadgen.ClosedLoopConfig{Client: client, Workers: 4, Duration: 200 * time.Millisecond, Rounds: 2,
		Targets: []loadgen.ClosedTarget{
			{Target: loadgen.Target{Name: "ok", URL: srv.URL, Model: "m"}, Keys: []string{"a", "b"}},
			{Target: loadgen.Target{Name: "refused", URL: srv.URL + "/refuse", Key: "c", Model: "m"}},
		}})
	if len(res) != 2 || res[0].Name != "ok" || res[1].Name != "refused" {
		t.Fatalf("results %+v, want ok then refused", res)
	}
	if res[0].Answered == 0 || res[0].Failed != 0 {
		t.Errorf("ok target: %+v, want answers and no failure", res[0])
	}
	if res[1].Answered != 0 || res[1].Failed == 0 || res[1].FirstFailure != "429 Too Many Requests" {
		t.Errorf("refused target: %+v, want only failures, the first a 429", res[1])
	}
	mu.Lock()
	defer mu.Unlock()
	if keys["Bearer a"] == 0 || keys["Bearer b"] == 0 || keys["Bearer c"] == 0 || len(keys) != 3 {
		t.Errorf("keys sent %v, want a and b shared by the first target's workers, c by the second's", keys)
	}
	if got := res[0].PerSecond(200 * time.Millisecond); got != float64(res[0].Answered)*5 {
		t.Errorf("PerSecond = %v for %d answers in 200 ms", got, res[0].Answered)
	}
	client.CloseIdleConnections()
}
