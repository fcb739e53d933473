package enginesim

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/openai"
)

// TestServeShutdown runs Serve on a loopback listener in real time; ending
// its context ends a stream in flight with an error event and [DONE], and
// Serve returns nil.
func TestServeShutdown(t *testing.T) {
	cfg := testConfig()
	cfg.Clock = NewScaledClock(1)
	s := newTestSim(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()

	resp := post(context.Background(), t, url, chatBody(t, s, "a long answer please", map[string]any{"stream": true, "max_tokens": 2000, "ignore_eos": true}))
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if kind, _ := eventKind(t, readEvent(t, br)); kind != "role" {
		t.Fatalf("first event is %s, want the role chunk", kind)
	}
	cancel()
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("read after shutdown: %v", err)
	}
	events := strings.Split(strings.TrimSuffix(string(rest), "\n\n"), "\n\n")
	n := len(events)
	if n < 2 || events[n-1] != "data: [DONE]" {
		t.Fatalf("stream after shutdown does not end with [DONE]: %q", events[max(0, n-3):])
	}
	e := openai.StreamError([]byte(strings.TrimPrefix(events[n-2], "data: ")))
	if e == nil || e.Status() != http.StatusServiceUnavailable {
		t.Errorf("stream after shutdown ends with %q, want a 503 error event", events[n-2])
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if err := s.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
		t.Errorf("second Run = %v, want ErrAlreadyRunning", err)
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"zero is the 8B", Config{}, false},
		{"qwen-32b profile", Config{Deployment: mustProfile(t, "qwen-32b")}, false},
		{"llama-70b profile", Config{Deployment: mustProfile(t, "llama-70b")}, false},
		{"max_model_len over the KV cache", Config{MaxModelLen: 1 << 20}, true},
		{"70B on one GPU does not fit", Config{Deployment: onOneGPU(mustProfile(t, "llama-70b"))}, true},
		{"bad fault", Config{Faults: Faults{ErrorRate: 2}}, true},
		{"negative time scale", Config{TimeScale: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Errorf("New error = %v, want error: %v", err, tt.wantErr)
			}
		})
	}
	if _, err := Profile("gpt-5"); !errors.Is(err, ErrUnknownProfile) {
		t.Errorf("Profile(unknown) = %v, want ErrUnknownProfile", err)
	}
	s := newTestSim(t, Config{Deployment: mustProfile(t, "qwen-32b")})
	if got, want := s.ServedModelName(), "Qwen/Qwen2.5-32B-Instruct"; got != want {
		t.Errorf("served name %q, want %q", got, want)
	}
}

func mustProfile(t *testing.T, name string) capacity.Deployment {
	t.Helper()
	d, err := Profile(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func onOneGPU(d capacity.Deployment) capacity.Deployment {
	d.TP = 1
	return d
}

func TestScaledClock(t *testing.T) {
	c := NewScaledClock(1000)
	start, wallStart := c.Now(), time.Now()
	if err := c.Sleep(context.Background(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if sim, wall := c.Now().Sub(start), time.Since(wallStart); sim < 2*time.Second || wall > time.Second {
		t.Errorf("2 s simulated took %v real and %v simulated", wall, sim)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with an ended context = %v", err)
	}
}
