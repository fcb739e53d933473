package adminclient

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// TestClientWaitReady: the readiness wait outlasts the client's retry
// budget while the platform is not there (hung-up connections, a load
// balancer's 502 and 503), returns at once on a refusal, and stops when
// its context ends, saying what the last try met.
func TestClientWaitReady(t *testing.T) {
	const models = `{"data":[]}`
	notThere := []func(http.ResponseWriter, *http.Request){hangUp, answer(502, "<html>bad gateway</html>"), answer(503, "no healthy target")}
	var starting []func(http.ResponseWriter, *http.Request)
	for range 3 * DefaultMaxAttempts {
		starting = append(starting, notThere...)
	}
	refused := answer(401, `{"error":{"message":"the credential is not valid","type":"authentication_error","param":null,"code":"invalid_api_key"}}`)
	tests := []struct {
		name         string
		script       []func(http.ResponseWriter, *http.Request)
		wantRequests int
		wantStatus   int // 0: ready
	}{
		{"ready at once", []func(http.ResponseWriter, *http.Request){answer(200, models)}, 1, 0},
		{"ready after a long start", append(starting, answer(200, models)), len(starting) + 1, 0},
		{"wrong token", []func(http.ResponseWriter, *http.Request){refused, answer(200, models)}, 1, 401},
		{"wrong token once up", append(notThere, refused), len(notThere) + 1, 401},
		{"not the platform", []func(http.ResponseWriter, *http.Request){answer(404, "404 page not found")}, 1, 404},
		{"forbidden", []func(http.ResponseWriter, *http.Request){answer(403, `{"error":{"message":"admin role required","type":"permission_error","param":null,"code":"admin_required"}}`)}, 1, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scriptedServer{script: tt.script}
			c, sleeps := scriptedClient(t, s)
			err := c.WaitReady(context.Background())
			n, _ := s.requests()
			// (Go's transport itself repeats a GET whose kept-alive
			// connection was hung up, so backoffs may be fewer than tries.)
			if n != tt.wantRequests {
				t.Errorf("requests = %d, want %d", n, tt.wantRequests)
			}
			for _, d := range *sleeps {
				if d > DefaultMaxDelay {
					t.Errorf("a backoff of %v, above the client's ceiling %v", d, DefaultMaxDelay)
				}
			}
			if tt.wantStatus == 0 {
				if err != nil {
					t.Errorf("WaitReady = %v, want ready", err)
				}
				return
			}
			if ae := apiError(t, err); ae.Status != tt.wantStatus {
				t.Errorf("status = %d, want %d", ae.Status, tt.wantStatus)
			}
		})
	}
	t.Run("deadline", func(t *testing.T) {
		s := &scriptedServer{script: []func(http.ResponseWriter, *http.Request){answer(503, "no healthy target")}}
		c, _ := scriptedClient(t, s)
		ctx, cancel := context.WithTimeoutCause(context.Background(), time.Hour, errors.New("ready_timeout passed"))
		tries := 0
		c.wait = func(context.Context, time.Duration) time.Duration {
			if tries++; tries == 5 {
				cancel()
				return time.Hour // only the context can end this wait
			}
			return 0
		}
		err := c.WaitReady(ctx)
		var ae *adminwire.APIError
		if n, _ := s.requests(); n != 5 || !errors.Is(err, context.Canceled) || !errors.As(err, &ae) || ae.Status != 503 {
			t.Errorf("after the deadline: %d requests, error %v; want 5, the cause and the last 503", n, err)
		}
	})
}
