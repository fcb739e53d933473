package internalhop

import (
	"context"
	"errors"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/openai"
)

const testToken = "internal-secret"

// remoteOver serves d on the internal endpoint and returns a Remote client
// of it.
func remoteOver(t *testing.T, d dispatch.Dispatcher) (*Remote, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(NewRemoteHandler(d, testToken, nil))
	t.Cleanup(srv.Close)
	return NewRemote(srv.URL+"/", testToken, srv.Client()), srv
}

// dispatcherFunc adapts a function to Dispatcher.
type dispatcherFunc func(context.Context, *dispatch.Job) (dispatch.Stream, error)

func (f dispatcherFunc) Dispatch(ctx context.Context, j *dispatch.Job) (dispatch.Stream, error) {
	return f(ctx, j)
}

func failing(err error) dispatch.Dispatcher {
	return dispatcherFunc(func(context.Context, *dispatch.Job) (dispatch.Stream, error) { return nil, err })
}

func TestRemoteMapsRefusals(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		check func(t *testing.T, err error)
	}{
		{"no capacity", dispatch.ErrNoCapacity, func(t *testing.T, err error) {
			if !errors.Is(err, dispatch.ErrNoCapacity) {
				t.Errorf("err = %v, want dispatch.ErrNoCapacity", err)
			}
		}},
		{"no healthy node", dispatch.ErrNoHealthyNode, func(t *testing.T, err error) {
			if !errors.Is(err, dispatch.ErrNoHealthyNode) {
				t.Errorf("err = %v, want dispatch.ErrNoHealthyNode", err)
			}
		}},
		{"unknown model", dispatch.ErrUnknownModel, func(t *testing.T, err error) {
			if !errors.Is(err, dispatch.ErrUnknownModel) {
				t.Errorf("err = %v, want dispatch.ErrUnknownModel", err)
			}
		}},
		{"engine refusal", &dispatch.Error{Status: 400, Body: openai.NewEngineError(400, "input_tokens", "too long"), RetryAfter: 7 * time.Second}, func(t *testing.T, err error) {
			var e *dispatch.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *dispatch.Error", err)
			}
			if e.Status != 400 || e.Body.Error.Message != "too long" || *e.Body.Error.Param != "input_tokens" || e.RetryAfter != 7*time.Second {
				t.Errorf("error = %d %+v %v, want 400 too long input_tokens 7s", e.Status, e.Body.Error, e.RetryAfter)
			}
		}},
		{"engine 404 is not an unknown model", &dispatch.Error{Status: 404, Body: openai.NewEngineError(404, "", "The model `x` does not exist.")}, func(t *testing.T, err error) {
			var e *dispatch.Error
			if !errors.As(err, &e) || e.Status != 404 || errors.Is(err, dispatch.ErrUnknownModel) {
				t.Errorf("err = %v, want the engine's 404 as *dispatch.Error", err)
			}
		}},
		{"other failure", errors.New("boom"), func(t *testing.T, err error) {
			var e *dispatch.Error
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
	_, srv := remoteOver(t, failing(dispatch.ErrNoCapacity))
	r := NewRemote(srv.URL, "wrong", srv.Client())
	_, err := r.Dispatch(t.Context(), job("m", true))
	var e *dispatch.Error
	if err == nil || errors.As(err, &e) || errors.Is(err, dispatch.ErrNoCapacity) || !strings.Contains(err.Error(), "internal token") {
		t.Errorf("err = %v, want a plain error naming the internal token", err)
	}
}

func TestRemoteUnreachableIsNoCapacity(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := NewRemote(url, testToken, nil).Dispatch(t.Context(), job("m", true))
	if !errors.Is(err, dispatch.ErrNoCapacity) {
		t.Errorf("err = %v, want dispatch.ErrNoCapacity", err)
	}
}

func TestRemoteHandlerRefusesBadInput(t *testing.T) {
	called := false
	_, srv := remoteOver(t, dispatcherFunc(func(context.Context, *dispatch.Job) (dispatch.Stream, error) {
		called = true
		return nil, dispatch.ErrNoCapacity
	}))
	const members = `,"messages":[]}`
	ok := map[string]string{"Authorization": "Bearer " + testToken, "X-Request-Id": "req_1",
		headerModel: "m", headerEstimate: "3", headerMaxOut: "16"}
	with := func(k, v string) map[string]string {
		h := maps.Clone(ok)
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	tests := []struct {
		name    string
		headers map[string]string
		body    string
		status  int
		code    string
	}{
		{"no token", with("Authorization", ""), members, 401, "invalid_internal_token"},
		{"empty bearer", with("Authorization", "Bearer "), members, 401, "invalid_internal_token"},
		{"bad id", with("X-Request-Id", "req 1/x"), members, 400, "invalid_request_id"},
		{"long id", with("X-Request-Id", strings.Repeat("a", 129)), members, 400, "invalid_request_id"},
		{"no model", with(headerModel, ""), members, 400, "missing_model"},
		{"long model", with(headerModel, strings.Repeat("m", maxModelLen+1)), members, 400, "missing_model"},
		{"no estimate", with(headerEstimate, ""), members, 400, "invalid_envelope"},
		{"negative estimate", with(headerEstimate, "-1"), members, 400, "invalid_envelope"},
		{"cap not a count", with(headerMaxOut, "1e3"), members, 400, "invalid_envelope"},
		{"not members", ok, `{"model":"m","messages":[]}`, 400, "invalid_body"},
		{"empty body", ok, ``, 400, "invalid_body"},
		{"too large", ok, `,"x":"` + strings.Repeat("a", MaxJobBytes) + `"}`, 413, "request_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+RemotePath, strings.NewReader(tt.body))
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			e := errorOf(resp)
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

// job is a small chat completion's envelope.
func job(model string, stream bool) *dispatch.Job {
	j, err := dispatch.NewJob("req_1", &openai.ChatCompletionRequest{
		Model: model, Stream: stream, Messages: []openai.Message{openai.TextMessage("user", "hi")},
	}, 1)
	if err != nil {
		panic(err)
	}
	return j
}
