package internalhop

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/tokens"
	"io"
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
		{"previous release: members", with(headerModel, ""), members, 400, "invalid_body"},
		{"previous release: no model", with(headerModel, ""), `{"messages":[]}`, 400, "missing_model"},
		{"previous release: not json", with(headerModel, ""), `{"model":`, 400, "invalid_body"},
		{"previous release: too large", with(headerModel, ""), `{"model":"m","x":"` + strings.Repeat("a", MaxJobBytes) + `"}`, 413, "request_too_large"},
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

// TestPreviousGatewayIsServed: a gateway of the previous release posts the
// request as JSON and reads server-sent events; a replica of this release
// serves it — the job's estimate made here, the engine body encoded here —
// so that a rollout of the orchestrators first drops nothing.
func TestPreviousGatewayIsServed(t *testing.T) {
	var got *dispatch.Job
	events := []string{`{"choices":[{"delta":{"content":"hi"}}]}`, `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`}
	_, srv := remoteOver(t, dispatcherFunc(func(_ context.Context, j *dispatch.Job) (dispatch.Stream, error) {
		got = j
		return &replayStream{events: events}, nil
	}))
	body := `{"model":"llama-8b","messages":[{"role":"user","content":"Tell me about the sea."}],"max_tokens":9}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+RemotePath, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("X-Request-Id", "req_old")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("answer %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), answer)
	}
	if want := "data: " + events[0] + "\n\ndata: " + events[1] + "\n\ndata: [DONE]\n\n"; string(answer) != want {
		t.Errorf("answer = %q, want %q", answer, want)
	}
	var sent openai.ChatCompletionRequest
	_ = json.Unmarshal([]byte(body), &sent)
	if got == nil || got.RequestID != "req_old" || got.Model != "llama-8b" || got.MaxOutput != 9 ||
		got.PromptEstimate != tokens.EstimateRequest(&sent) || got.PromptEstimate <= 0 {
		t.Fatalf("job = %+v", got)
	}
	var engine map[string]any
	if err := json.Unmarshal(got.EngineBody("served"), &engine); err != nil || engine["model"] != "served" || engine["stream"] != true {
		t.Errorf("engine body %s (%v)", got.EngineBody("served"), err)
	}
}

// TestOlderOrchestratorMeansNoCapacity: a replica of the previous release
// cannot read this gateway's job, or answers it in server-sent events; the
// gateway then waits for another replica (dispatch.ErrNoCapacity), as for
// one that is unreachable, and never answers its client with the old
// replica's refusal.
func TestOlderOrchestratorMeansNoCapacity(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"refuses the members": func(w http.ResponseWriter, _ *http.Request) {
			writeRemoteError(w, http.StatusBadRequest, openai.NewError(openai.TypeInvalidRequest, "invalid_body", "", "the job body is not a chat completion request"))
		},
		"answers server-sent events": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"choices\":[]}\n\ndata: [DONE]\n\n")
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			_, err := NewRemote(srv.URL, testToken, srv.Client()).Dispatch(t.Context(), job("m", true))
			if !errors.Is(err, dispatch.ErrNoCapacity) || !strings.Contains(err.Error(), "older than this gateway") {
				t.Errorf("err = %v, want ErrNoCapacity naming the older replica", err)
			}
		})
	}
}

// replayStream is a stream of the given events, then the engine's end.
type replayStream struct {
	events []string
	i      int
}

func (s *replayStream) Recv() (dispatch.Event, error) {
	if s.i == len(s.events) {
		return dispatch.Event{}, io.EOF
	}
	s.i++
	return dispatch.Event{Data: []byte(s.events[s.i-1])}, nil
}

func (s *replayStream) Close() error { return nil }
