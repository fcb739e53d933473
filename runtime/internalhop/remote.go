package internalhop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/openai"
)

// RemotePath is where an orchestrator replica takes jobs from gateways.
const RemotePath = "/internal/v1/dispatch"

// The job's envelope travels in these headers; the body is the engine
// request's members after its model (dispatch.Job.Members).
const (
	headerModel    = "X-Llmplat-Model"
	headerEstimate = "X-Llmplat-Prompt-Estimate"
	headerMaxOut   = "X-Llmplat-Max-Output"
)

// Error codes the remote dispatch endpoint answers with besides an engine's
// own refusal; the client maps them back to the sentinel errors.
const (
	codeNoCapacity   = "no_capacity"
	codeUnknownModel = "model_not_found"
	codeNoHealthy    = "no_healthy_node"
)

// maxErrorBody bounds how much of an orchestrator's error answer is read:
// error bodies are a few hundred bytes.
const maxErrorBody = 64 << 10

// Remote sends each job to an orchestrator replica over HTTP: the gateway's
// dispatcher when gateways and orchestrators run as separate processes. The
// replica routes the job to a node and streams back the engine's events
// with what it read of them (EventsType); closing the stream aborts the
// request on the node.
type Remote struct {
	base   string
	token  string
	client *http.Client
}

var _ dispatch.Dispatcher = (*Remote)(nil)

// NewRemote returns a dispatcher that posts jobs to the orchestrator at
// baseURL ("http://orchestrator:8081"), authenticating with the platform's
// internal token. A nil client means NewClient().
func NewRemote(baseURL, token string, client *http.Client) *Remote {
	if client == nil {
		client = NewClient()
	}
	return &Remote{base: strings.TrimSuffix(baseURL, "/"), token: token, client: client}
}

// MaxIdleConns is how many idle connections a gateway keeps to one
// orchestrator replica: one per stream it relays at once, so a busy
// gateway never costs a new connection per request. Go's default keeps two.
const MaxIdleConns = 1024

// IdleConnTimeout closes a connection to a replica idle this long: shorter
// than the replica's own keep-alive timeout (the platform's servers close
// idle connections after a minute), since a request sent on a connection
// the server is closing fails and Go does not retry a POST once written.
const IdleConnTimeout = 30 * time.Second

// NewClient returns a client for orchestrator replicas: no overall timeout
// (a stream lasts as long as its answer; contexts end it) and an idle pool
// sized for many concurrent streams to one host.
func NewClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0 // no limit across hosts
	tr.MaxIdleConnsPerHost = MaxIdleConns
	tr.IdleConnTimeout = IdleConnTimeout
	return &http.Client{Transport: tr}
}

// Dispatch implements dispatch.Dispatcher. An unreachable orchestrator is
// dispatch.ErrNoCapacity, as an unreachable engine is: the gateway queues
// and tries again rather than failing the request at once.
func (r *Remote) Dispatch(ctx context.Context, job *dispatch.Job) (dispatch.Stream, error) {
	rctx, cancel := context.WithCancel(ctx)
	hr, err := http.NewRequestWithContext(rctx, http.MethodPost, r.base+RemotePath, bytes.NewReader(job.Members))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("build dispatch request: %w", err)
	}
	h := hr.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", EventsType)
	h.Set("Authorization", "Bearer "+r.token)
	h.Set("X-Request-Id", job.RequestID)
	h.Set(headerModel, job.Model)
	h.Set(headerEstimate, strconv.FormatInt(job.PromptEstimate, 10))
	h.Set(headerMaxOut, strconv.FormatInt(job.MaxOutput, 10))
	resp, err := r.client.Do(hr)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: orchestrator %s: %v", dispatch.ErrNoCapacity, r.base, err)
	}
	if resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") != EventsType {
		// A replica of the previous release answers server-sent events,
		// which this gateway does not parse: another replica may be new.
		cancel()
		resp.Body.Close()
		return nil, fmt.Errorf("%w: orchestrator %s answered %q, not event records: it is older than this gateway (roll the orchestrators before the gateways)",
			dispatch.ErrNoCapacity, r.base, resp.Header.Get("Content-Type"))
	}
	if resp.StatusCode == http.StatusOK {
		return &hopStream{body: resp.Body, cancel: cancel,
			rr: recordReader{r: bufio.NewReaderSize(resp.Body, readBufferSize)}}, nil
	}
	defer cancel()
	defer resp.Body.Close()
	return nil, r.refusal(resp, job.Model)
}

// readBufferSize is the buffer each open stream reads the hop through:
// an event is a few hundred bytes.
const readBufferSize = 4 << 10

// refusal turns the orchestrator's non-200 answer into the dispatcher's
// errors. Its own refusals become the sentinels; an engine's refusal passed
// through becomes *dispatch.Error; an authentication failure is the
// platform's misconfiguration, never the client's, so it is a plain error.
func (r *Remote) refusal(resp *http.Response, model string) error {
	e := errorOf(resp)
	var code string
	if e.Body != nil {
		_ = json.Unmarshal(e.Body.Error.Code, &code) // an engine's code is an integer
	}
	switch {
	case resp.StatusCode == http.StatusBadRequest && code == "invalid_body":
		// The envelope's members are no request to a replica of the
		// previous release, which decodes the body as one; a replica of
		// this release never refuses what a gateway of it encoded.
		return fmt.Errorf("%w: orchestrator %s could not read the job: it may be older than this gateway (roll the orchestrators before the gateways)",
			dispatch.ErrNoCapacity, r.base)
	case resp.StatusCode == http.StatusServiceUnavailable && code == codeNoCapacity:
		return fmt.Errorf("%w: %s", dispatch.ErrNoCapacity, model)
	case resp.StatusCode == http.StatusNotFound && code == codeUnknownModel:
		return fmt.Errorf("%w: %s", dispatch.ErrUnknownModel, model)
	case resp.StatusCode == http.StatusServiceUnavailable && code == codeNoHealthy:
		return fmt.Errorf("%w: %s", dispatch.ErrNoHealthyNode, model)
	case resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("orchestrator %s refused the gateway's internal token (%d): check that both share it", r.base, resp.StatusCode)
	}
	return e
}

// errorOf reads an orchestrator's refusal: the platform's own error body,
// passed on as it is.
func errorOf(resp *http.Response) *dispatch.Error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &dispatch.Error{Status: resp.StatusCode}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	var body openai.ErrorBody
	if json.Unmarshal(raw, &body) == nil && body.Error.Message != "" {
		e.Body = &body
	} else {
		e.Body = openai.NewEngineError(resp.StatusCode, "", http.StatusText(resp.StatusCode))
	}
	return e
}

// hopStream reads the records of one answer.
type hopStream struct {
	body      io.ReadCloser
	cancel    context.CancelFunc
	rr        recordReader
	done      bool
	closeOnce sync.Once
}

func (s *hopStream) Recv() (dispatch.Event, error) {
	if s.done {
		return dispatch.Event{}, io.EOF
	}
	var ev dispatch.Event
	done, err := s.rr.next(&ev)
	switch {
	case done:
		s.done = true
		// The response's end comes with its last record: reading it gives
		// the connection back to the pool.
		_, _ = io.Copy(io.Discard, io.LimitReader(s.body, 1))
		return dispatch.Event{}, io.EOF
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return dispatch.Event{}, fmt.Errorf("%w: the orchestrator ended the stream before the engine's end", dispatch.ErrStreamBroken)
	case err != nil:
		return dispatch.Event{}, fmt.Errorf("%w: %v", dispatch.ErrStreamBroken, err)
	}
	return ev, nil
}

func (s *hopStream) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.body.Close()
	})
	return nil
}
