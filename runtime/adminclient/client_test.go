package adminclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// scriptedServer answers the nth request with script[n] (the last entry
// repeats) and records each request's Idempotency-Key.
type scriptedServer struct {
	mu     sync.Mutex
	script []func(w http.ResponseWriter, r *http.Request)
	n      int
	idem   []string
}

func (s *scriptedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	step := s.script[min(s.n, len(s.script)-1)]
	s.n++
	s.idem = append(s.idem, r.Header.Get(adminwire.IdempotencyHeader))
	s.mu.Unlock()
	step(w, r)
}

func (s *scriptedServer) requests() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, append([]string(nil), s.idem...)
}

// answer returns a step that writes status, headers and body.
func answer(status int, body string, header ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// scriptedClient is a client of s that records its backoffs instead of
// waiting them, with the largest jitter.
func scriptedClient(t *testing.T, s *scriptedServer) (*Client, *[]time.Duration) {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := NewClient(srv.URL, "llpadm_test-token-not-a-secret-0123456789", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	var sleeps []time.Duration
	c.wait = func(_ context.Context, d time.Duration) time.Duration { sleeps = append(sleeps, d); return 0 }
	c.jitter = func(n int64) int64 { return n - 1 }
	return c, &sleeps
}

const teamJSON = `{"id":7,"name":"search","balance_microcredits":0,"reserved_microcredits":0,"available_microcredits":0,"created_at":"2026-03-01T12:00:00Z"}`

func TestClientRetries(t *testing.T) {
	unavailable := answer(503, `{"error":{"message":"retry","type":"service_unavailable_error","param":null,"code":"unavailable"}}`, "Retry-After", "2")
	tests := []struct {
		name         string
		script       []func(http.ResponseWriter, *http.Request)
		wantRequests int
		wantStatus   int // 0: success
		wantSleeps   []time.Duration
	}{
		{"success at once", []func(http.ResponseWriter, *http.Request){answer(200, teamJSON)}, 1, 0, nil},
		{"503 twice, honouring Retry-After", []func(http.ResponseWriter, *http.Request){unavailable, unavailable, answer(200, teamJSON)},
			3, 0, []time.Duration{2 * time.Second, 2 * time.Second}},
		{"connection dropped", []func(http.ResponseWriter, *http.Request){hangUp, answer(200, teamJSON)}, 2, 0, []time.Duration{DefaultBaseDelay - 1}},
		{"200 cut short", []func(http.ResponseWriter, *http.Request){answer(200, teamJSON[:len(teamJSON)/2]), answer(200, teamJSON)}, 2, 0, []time.Duration{DefaultBaseDelay - 1}},
		{"502 from a proxy, not json", []func(http.ResponseWriter, *http.Request){answer(502, "<html>bad gateway</html>"), answer(200, teamJSON)}, 2, 0, []time.Duration{DefaultBaseDelay - 1}},
		{"504 until the attempts run out", []func(http.ResponseWriter, *http.Request){answer(504, `{"error":{"message":"slow","type":"server_error","param":null,"code":"timeout"}}`)},
			DefaultMaxAttempts, 504, []time.Duration{DefaultBaseDelay - 1, 2*DefaultBaseDelay - 1, 4*DefaultBaseDelay - 1}},
		// A 500 is the server failing this request for good (a statement the
		// database refuses); outages are 503, so a 500 is not repeated.
		{"500 is not retried", []func(http.ResponseWriter, *http.Request){answer(500, `{"error":{"message":"boom","type":"server_error","param":null,"code":"internal_error"}}`)}, 1, 500, nil},
		{"400 is not retried", []func(http.ResponseWriter, *http.Request){answer(400, `{"error":{"message":"bad","type":"invalid_request_error","param":"name","code":"invalid_value"}}`)}, 1, 400, nil},
		{"404 is not retried", []func(http.ResponseWriter, *http.Request){answer(404, `{"error":{"message":"gone","type":"not_found_error","param":"id","code":"not_found"}}`)}, 1, 404, nil},
		{"409 is not retried", []func(http.ResponseWriter, *http.Request){answer(409, `{"error":{"message":"taken","type":"invalid_request_error","param":"name","code":"conflict"}}`)}, 1, 409, nil},
		{"501 is not retried", []func(http.ResponseWriter, *http.Request){answer(501, `{"error":{"message":"no","type":"server_error","param":null,"code":"not_implemented"}}`)}, 1, 501, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scriptedServer{script: tt.script}
			c, sleeps := scriptedClient(t, s)
			got, err := c.GetTeam(context.Background(), 7)
			n, _ := s.requests()
			if n != tt.wantRequests {
				t.Errorf("requests = %d, want %d", n, tt.wantRequests)
			}
			if fmt.Sprint(*sleeps) != fmt.Sprint(tt.wantSleeps) {
				t.Errorf("backoffs = %v, want %v", *sleeps, tt.wantSleeps)
			}
			if tt.wantStatus == 0 {
				if err != nil || got.ID != 7 || got.Name != "search" {
					t.Errorf("GetTeam = %+v, %v", got, err)
				}
				return
			}
			if ae := apiError(t, err); ae.Status != tt.wantStatus {
				t.Errorf("status = %d, want %d", ae.Status, tt.wantStatus)
			}
		})
	}
}

func TestClientBackoffIsBounded(t *testing.T) {
	c, err := NewClient("http://127.0.0.1:1", "token", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.jitter = func(n int64) int64 { return n - 1 }
	tests := []struct {
		try        int
		retryAfter time.Duration
		want       time.Duration
	}{
		{1, 0, DefaultBaseDelay - 1},
		{3, 0, 4*DefaultBaseDelay - 1},
		{5, 0, 16*DefaultBaseDelay - 1},
		{6, 0, DefaultMaxDelay - 1},
		{60, 0, DefaultMaxDelay - 1},
		{1, 3 * time.Second, 3 * time.Second},
		{1, time.Hour, DefaultMaxDelay},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("try %d retry-after %v", tt.try, tt.retryAfter), func(t *testing.T) {
			if got := c.backoff(tt.try, tt.retryAfter); got != tt.want {
				t.Errorf("backoff = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClientStopsRetryingWhenContextEnds(t *testing.T) {
	s := &scriptedServer{script: []func(http.ResponseWriter, *http.Request){answer(503, `{}`)}}
	c, _ := scriptedClient(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	// The wait outlasts the test, so only the context can end it.
	c.wait = func(context.Context, time.Duration) time.Duration { cancel(); return time.Hour }
	_, err := c.GetTeam(ctx, 7)
	var ae *adminwire.APIError
	if n, _ := s.requests(); n != 1 || !errors.Is(err, context.Canceled) || !errors.As(err, &ae) || ae.Status != 503 {
		t.Errorf("after cancel: %d requests, error %v; want 1, context.Canceled and the last try's 503", n, err)
	}
}

func TestClientCreateRetriesReuseOneIdempotencyKey(t *testing.T) {
	s := &scriptedServer{script: []func(http.ResponseWriter, *http.Request){hangUp, answer(503, `{}`), answer(201, `{"id":1,"key":"x"}`)}}
	c, _ := scriptedClient(t, s)
	if _, err := c.CreateKey(context.Background(), adminwire.CreateKeyRequest{TeamID: 1}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.IssueNodeToken(context.Background(), "n1", ""); err != nil {
		t.Fatal(err)
	}
	_, keys := s.requests()
	if len(keys) != 4 || keys[0] == "" || keys[0] != keys[1] || keys[1] != keys[2] || keys[3] == keys[0] || keys[3] == "" {
		t.Errorf("Idempotency-Keys sent = %q; want one key for the three tries of the create, another for the next create", keys)
	}
}

func TestClientErrorsAndPrinting(t *testing.T) {
	const token = "llpadm_client-token-that-must-not-print-0123"
	s := &scriptedServer{script: []func(http.ResponseWriter, *http.Request){
		answer(400, `{"error":{"message":"context too long","type":"BadRequestError","param":"input_tokens","code":400}}`)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, err := NewClient(srv.URL+"/", token, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetTeam(context.Background(), 1)
	ae := apiError(t, err)
	want := adminwire.APIError{Status: 400, Type: "BadRequestError", Code: "400", Param: "input_tokens", Message: "context too long"}
	if *ae != want {
		t.Errorf("APIError = %+v, want %+v", *ae, want)
	}
	for _, text := range []string{err.Error(), fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c)} {
		if strings.Contains(text, "must-not-print") {
			t.Errorf("%q shows the token", text)
		}
	}
	for _, bad := range []struct{ url, token string }{{"ftp://x", "t"}, {"http://", "t"}, {"http://x", ""}} {
		if _, err := NewClient(bad.url, bad.token, nil); err == nil {
			t.Errorf("NewClient(%q, %q) accepted", bad.url, bad.token)
		}
	}
}

// apiError returns the *APIError in err, or fails t.
func apiError(t *testing.T, err error) *adminwire.APIError {
	t.Helper()
	var ae *adminwire.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v, want an *APIError", err)
	}
	return ae
}
