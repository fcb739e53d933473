package dispatch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/openai"
)

const testToken = "internal-secret"

// remoteOver serves d on the internal endpoint and returns a Remote client
// of it.
func remoteOver(t *testing.T, d Dispatcher) (*Remote, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(NewRemoteHandler(d, testToken, nil))
	t.Cleanup(srv.Close)
	return NewRemote(srv.URL+"/", testToken, srv.Client()), srv
}

// TestRemoteRelaysEventsUnchanged compares a job run through the internal
// endpoint with the same job run directly: the events, their token counts
// and the usage must be identical, and the engine sees the same body.
func TestRemoteRelaysEventsUnchanged(t *testing.T) {
	var viaRemote, direct openai.ChatCompletionRequest
	srvRemote := goldenEngine(t, "stream_include_usage.golden", &viaRemote)
	srvDirect := goldenEngine(t, "stream_include_usage.golden", &direct)
	targets := func(url string) map[string][]Target {
		return map[string][]Target{"llama-8b": {{URL: url, ServedName: "meta-llama/Llama-3.1-8B-Instruct"}}}
	}
	r, _ := remoteOver(t, NewDirect(targets(srvRemote.URL), nil))

	want := run(t, NewDirect(targets(srvDirect.URL), nil))
	got := run(t, r)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("remote events differ from direct ones:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(viaRemote, direct) {
		t.Errorf("engine body via remote = %+v, direct = %+v", viaRemote, direct)
	}
	var usage *openai.Usage
	for _, ev := range got {
		if ev.Usage != nil {
			usage = ev.Usage
		}
	}
	if usage == nil || usage.CompletionTokens == 0 {
		t.Errorf("usage = %+v, want the engine's usage", usage)
	}
}

func run(t *testing.T, d Dispatcher) []Event {
	t.Helper()
	s, err := d.Dispatch(t.Context(), job("llama-8b", false))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	events, end := drain(t, s)
	if !errors.Is(end, io.EOF) {
		t.Fatalf("end = %v, want io.EOF", end)
	}
	return events
}

// dispatcherFunc adapts a function to Dispatcher.
type dispatcherFunc func(context.Context, *Job) (Stream, error)

func (f dispatcherFunc) Dispatch(ctx context.Context, j *Job) (Stream, error) { return f(ctx, j) }

func failing(err error) Dispatcher {
	return dispatcherFunc(func(context.Context, *Job) (Stream, error) { return nil, err })
}

func TestRemoteMapsRefusals(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		check func(t *testing.T, err error)
	}{
		{"no capacity", ErrNoCapacity, func(t *testing.T, err error) {
			if !errors.Is(err, ErrNoCapacity) {
				t.Errorf("err = %v, want ErrNoCapacity", err)
			}
		}},
		{"no healthy node", ErrNoHealthyNode, func(t *testing.T, err error) {
			if !errors.Is(err, ErrNoHealthyNode) {
				t.Errorf("err = %v, want ErrNoHealthyNode", err)
			}
		}},
		{"unknown model", ErrUnknownModel, func(t *testing.T, err error) {
			if !errors.Is(err, ErrUnknownModel) {
				t.Errorf("err = %v, want ErrUnknownModel", err)
			}
		}},
		{"engine refusal", &Error{Status: 400, Body: openai.NewEngineError(400, "input_tokens", "too long"), RetryAfter: 7 * time.Second}, func(t *testing.T, err error) {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if e.Status != 400 || e.Body.Error.Message != "too long" || *e.Body.Error.Param != "input_tokens" || e.RetryAfter != 7*time.Second {
				t.Errorf("error = %d %+v %v, want 400 too long input_tokens 7s", e.Status, e.Body.Error, e.RetryAfter)
			}
		}},
		{"engine 404 is not an unknown model", &Error{Status: 404, Body: openai.NewEngineError(404, "", "The model `x` does not exist.")}, func(t *testing.T, err error) {
			var e *Error
			if !errors.As(err, &e) || e.Status != 404 || errors.Is(err, ErrUnknownModel) {
				t.Errorf("err = %v, want the engine's 404 as *Error", err)
			}
		}},
		{"other failure", errors.New("boom"), func(t *testing.T, err error) {
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadGateway || strings.Contains(e.Body.Error.Message, "boom") {
				t.Errorf("err = %v, want a 502 that hides the internal cause", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := remoteOver(t, failing(tt.err))
			_, err := r.Dispatch(t.Context(), job("m", true))
			tt.check(t, err)
		})
	}
}

func TestRemoteWrongTokenIsPlatformError(t *testing.T) {
	_, srv := remoteOver(t, failing(ErrNoCapacity))
	r := NewRemote(srv.URL, "wrong", srv.Client())
	_, err := r.Dispatch(t.Context(), job("m", true))
	var e *Error
	if err == nil || errors.As(err, &e) || errors.Is(err, ErrNoCapacity) || !strings.Contains(err.Error(), "internal token") {
		t.Errorf("err = %v, want a plain error naming the internal token", err)
	}
}

func TestRemoteUnreachableIsNoCapacity(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := NewRemote(url, testToken, nil).Dispatch(t.Context(), job("m", true))
	if !errors.Is(err, ErrNoCapacity) {
		t.Errorf("err = %v, want ErrNoCapacity", err)
	}
}

func TestRemoteHandlerRefusesBadInput(t *testing.T) {
	called := false
	_, srv := remoteOver(t, dispatcherFunc(func(context.Context, *Job) (Stream, error) {
		called = true
		return nil, ErrNoCapacity
	}))
	tests := []struct {
		name, auth, id, body string
		status               int
		code                 string
	}{
		{"no token", "", "req_1", `{"model":"m"}`, 401, "invalid_internal_token"},
		{"empty bearer", "Bearer ", "req_1", `{"model":"m"}`, 401, "invalid_internal_token"},
		{"bad id", "Bearer " + testToken, "req 1/x", `{"model":"m"}`, 400, "invalid_request_id"},
		{"long id", "Bearer " + testToken, strings.Repeat("a", 129), `{"model":"m"}`, 400, "invalid_request_id"},
		{"not json", "Bearer " + testToken, "req_1", `{"model":`, 400, "invalid_body"},
		{"no model", "Bearer " + testToken, "req_1", `{"messages":[]}`, 400, "missing_model"},
		{"too large", "Bearer " + testToken, "req_1", `{"model":"m","x":"` + strings.Repeat("a", MaxJobBytes) + `"}`, 413, "request_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+RemotePath, strings.NewReader(tt.body))
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			req.Header.Set("X-Request-Id", tt.id)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			e := engineError(resp).(*Error)
			var code string
			if len(e.Body.Error.Code) > 2 {
				code = string(e.Body.Error.Code[1 : len(e.Body.Error.Code)-1])
			}
			if e.Status != tt.status || code != tt.code {
				t.Errorf("answer = %d %s, want %d %s", e.Status, code, tt.status, tt.code)
			}
		})
	}
	if called {
		t.Error("a refused request reached the dispatcher")
	}
}

// TestRemoteBrokenStream: a stream that breaks behind the orchestrator
// reaches the gateway broken, never as a clean end.
func TestRemoteBrokenStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
	}))
	defer srv.Close()
	r, _ := remoteOver(t, NewDirect(map[string][]Target{"m": {{URL: srv.URL, ServedName: "m"}}}, nil))
	s, err := r.Dispatch(t.Context(), job("m", true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	events, end := drain(t, s)
	if len(events) != 1 || events[0].Tokens != 1 {
		t.Errorf("events = %+v, want 1 content event", events)
	}
	if !errors.Is(end, ErrStreamBroken) {
		t.Errorf("end = %v, want ErrStreamBroken", end)
	}
}

// TestRemoteCancelAbortsEngine: the gateway ending its context aborts the
// request on the engine behind the orchestrator.
func TestRemoteCancelAbortsEngine(t *testing.T) {
	srv, aborted := hangingEngine(t)
	r, _ := remoteOver(t, NewDirect(map[string][]Target{"m": {{URL: srv.URL, ServedName: "m"}}}, nil))
	checkCancelAborts(t, r, aborted)
}
