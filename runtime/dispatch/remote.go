package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/llmplat/llmplat/runtime/openai"
)

// RemotePath is where an orchestrator replica takes jobs from gateways.
const RemotePath = "/internal/v1/dispatch"

// Error codes the remote dispatch endpoint answers with besides an engine's
// own refusal; the client maps them back to the sentinel errors.
const (
	codeNoCapacity   = "no_capacity"
	codeUnknownModel = "model_not_found"
	codeNoHealthy    = "no_healthy_node"
)

// Remote sends each job to an orchestrator replica over HTTP: the gateway's
// dispatcher when gateways and orchestrators run as separate processes. The
// replica routes the job to a node and streams the engine's events back
// unchanged; closing the stream aborts the request on the node.
type Remote struct {
	base   string
	token  string
	client *http.Client
}

var _ Dispatcher = (*Remote)(nil)

// NewRemote returns a dispatcher that posts jobs to the orchestrator at
// baseURL ("http://orchestrator:8081"), authenticating with the platform's
// internal token. A nil client means NewEngineClient().
func NewRemote(baseURL, token string, client *http.Client) *Remote {
	if client == nil {
		client = NewEngineClient()
	}
	return &Remote{base: strings.TrimSuffix(baseURL, "/"), token: token, client: client}
}

// Dispatch implements Dispatcher. An unreachable orchestrator is
// ErrNoCapacity, as an unreachable engine is: the gateway queues and tries
// again rather than failing the request at once.
func (r *Remote) Dispatch(ctx context.Context, job *Job) (Stream, error) {
	req := *job.Request
	req.Model = job.Model
	body, err := json.Marshal(&req)
	if err != nil {
		return nil, fmt.Errorf("encode job: %w", err)
	}
	rctx, cancel := context.WithCancel(ctx)
	hr, err := http.NewRequestWithContext(rctx, http.MethodPost, r.base+RemotePath, bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("build dispatch request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	hr.Header.Set("Authorization", "Bearer "+r.token)
	hr.Header.Set("X-Request-Id", job.RequestID)
	resp, err := r.client.Do(hr)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: orchestrator %s: %v", ErrNoCapacity, r.base, err)
	}
	if resp.StatusCode == http.StatusOK {
		return &httpStream{body: resp.Body, cancel: cancel, sse: openai.NewSSEReader(resp.Body)}, nil
	}
	defer cancel()
	defer resp.Body.Close()
	return nil, r.refusal(resp, job.Model)
}

// refusal turns the orchestrator's non-200 answer into the dispatcher's
// errors. Its own refusals become the sentinels; an engine's refusal passed
// through becomes *Error; an authentication failure is the platform's
// misconfiguration, never the client's, so it is a plain error.
func (r *Remote) refusal(resp *http.Response, model string) error {
	err := engineError(resp)
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	var code string
	if e.Body != nil {
		_ = json.Unmarshal(e.Body.Error.Code, &code) // an engine's code is an integer
	}
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable && code == codeNoCapacity:
		return fmt.Errorf("%w: %s", ErrNoCapacity, model)
	case resp.StatusCode == http.StatusNotFound && code == codeUnknownModel:
		return fmt.Errorf("%w: %s", ErrUnknownModel, model)
	case resp.StatusCode == http.StatusServiceUnavailable && code == codeNoHealthy:
		return fmt.Errorf("%w: %s", ErrNoHealthyNode, model)
	case resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("orchestrator %s refused the gateway's internal token (%d): check that both share it", r.base, resp.StatusCode)
	}
	return e
}
