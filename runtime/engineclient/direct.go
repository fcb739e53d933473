package engineclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/llmplat/llmplat/runtime/hoptrace"
	"github.com/llmplat/llmplat/runtime/jsonscan"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// maxErrorBody bounds how much of an orchestrator's error answer is read:
// error bodies are a few hundred bytes.
const maxErrorBody = 64 << 10

// MaxUpstreamLog bounds how much of an engine's error answer is kept, for
// the server's log (Error.Upstream): vLLM's messages fit, a page does not
// need to.
const MaxUpstreamLog = 1 << 10

// Target is one engine serving a model.
type Target struct {
	// URL is the engine's base URL, without /v1 ("http://10.0.0.5:8000").
	URL string
	// ServedName is the model name the engine answers to. Empty means the
	// name the Direct's ServedNames give, else the platform model name.
	ServedName string
	// MaxInFlight caps the requests sent to this engine at once (its
	// --max-num-seqs is the natural value); past it the job gets
	// ErrNoCapacity and the gateway queues it. Zero means no cap.
	MaxInFlight int
}

// Direct sends each job straight to an engine's URL, round-robin among the
// engines of its model. It is the dispatcher of the local mode before the
// orchestrator, and the floor the orchestrator's routing is measured against.
type Direct struct {
	client  *http.Client
	targets map[string][]*target
	next    map[string]*atomic.Uint64
	served  *ServedNames
}

// target is a Target with its in-flight count.
type target struct {
	Target
	inFlight atomic.Int64
}

// take reserves one in-flight place, or reports that the engine is full.
func (t *target) take() bool {
	if t.MaxInFlight <= 0 {
		t.inFlight.Add(1)
		return true
	}
	for {
		n := t.inFlight.Load()
		if n >= int64(t.MaxInFlight) {
			return false
		}
		if t.inFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

var _ dispatch.Dispatcher = (*Direct)(nil)

// NewDirect returns a dispatcher over the given engines, keyed by platform
// model name. A nil client means NewEngineClient().
func NewDirect(targets map[string][]Target, client *http.Client) *Direct {
	if client == nil {
		client = NewEngineClient()
	}
	d := &Direct{client: client, targets: make(map[string][]*target, len(targets)), next: make(map[string]*atomic.Uint64, len(targets))}
	for m, ts := range targets {
		for _, t := range ts {
			d.targets[m] = append(d.targets[m], &target{Target: t})
		}
		d.next[m] = new(atomic.Uint64)
	}
	return d
}

// UseServedNames makes targets without a ServedName send the name that
// names gives for their model, as declared in the admin API. Call it before
// the first Dispatch.
func (d *Direct) UseServedNames(names *ServedNames) { d.served = names }

// servedName is the model name target t answers to for model.
func (d *Direct) servedName(ctx context.Context, t *target, model string) string {
	if t.ServedName != "" {
		return t.ServedName
	}
	if d.served != nil {
		if name, ok := d.served.Lookup(ctx, model); ok {
			return name
		}
	}
	return model
}

// Dispatch implements Dispatcher.
func (d *Direct) Dispatch(ctx context.Context, job *dispatch.Job) (dispatch.Stream, error) {
	ts := d.targets[job.Model]
	if len(ts) == 0 {
		return nil, fmt.Errorf("%w: %s", dispatch.ErrUnknownModel, job.Model)
	}
	first := int(d.next[job.Model].Add(1) - 1)
	for i := range ts {
		t := ts[(first+i)%len(ts)]
		if !t.take() {
			continue
		}
		body := job.EngineBody(d.servedName(ctx, t, job.Model))
		st, err := OpenEngineStream(ctx, d.client, t.URL, job.RequestID, body)
		if err != nil {
			t.inFlight.Add(-1)
			return nil, err
		}
		return &countedStream{Stream: st, release: func() { t.inFlight.Add(-1) }}, nil
	}
	return nil, fmt.Errorf("%w: every engine of %s is full", dispatch.ErrNoCapacity, job.Model)
}

// CloseIdleConnections closes the connections to engines that carry no
// stream, such as before the engines shut down.
func (d *Direct) CloseIdleConnections() { d.client.CloseIdleConnections() }

// countedStream gives its engine's in-flight place back on Close.
type countedStream struct {
	dispatch.Stream
	once    sync.Once
	release func()
}

func (s *countedStream) Close() error {
	err := s.Stream.Close()
	s.once.Do(s.release)
	return err
}

// OpenEngineStream posts body to an OpenAI-compatible engine at baseURL and
// returns its event stream, each event read by ParseEvent. The stream is
// aborted on the engine when ctx ends or Close is called: closing the HTTP
// stream is how vLLM cancels.
func OpenEngineStream(ctx context.Context, client *http.Client, baseURL, requestID string, body []byte) (dispatch.Stream, error) {
	return OpenEngineStreamReading(ctx, client, baseURL, requestID, body, ParseEvent)
}

// OpenEngineStreamReading is OpenEngineStream with each event read by
// read: the node agent's Classify.
func OpenEngineStreamReading(ctx context.Context, client *http.Client, baseURL, requestID string, body []byte,
	read func([]byte) dispatch.Event) (dispatch.Stream, error) {
	if hoptrace.On {
		hoptrace.Mark(requestID, hoptrace.EngineSent)
	}
	rctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, baseURL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("build engine request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: engine %s: %v", dispatch.ErrNoCapacity, baseURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		return nil, upstreamError(resp)
	}
	st := &httpStream{body: resp.Body, cancel: cancel, sse: openai.NewSSEReader(resp.Body), read: read}
	if hoptrace.On {
		st.trace.Set(requestID)
	}
	return st, nil
}

// engineError reads an orchestrator's refusal (Remote): the platform's own
// error body, passed on as it is.
func engineError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &dispatch.Error{Status: resp.StatusCode, RetryAfter: retryAfterOf(resp)}
	var body openai.ErrorBody
	if json.Unmarshal(raw, &body) == nil && body.Error.Message != "" {
		e.Body = &body
	} else {
		e.Body = openai.NewEngineError(resp.StatusCode, "", http.StatusText(resp.StatusCode))
	}
	return e
}

// upstreamError reads an engine's refusal. The client gets a body of our
// own for the status: whatever answered (a URL may reach an internal
// service) must not speak to the client through us. The engine's words
// are kept, bounded, in Upstream for the server's log.
func upstreamError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxUpstreamLog))
	status := resp.StatusCode
	if status < 400 || status > 599 {
		status = http.StatusBadGateway // not an error status: the engine misbehaved
	}
	return &dispatch.Error{Status: status, RetryAfter: retryAfterOf(resp),
		Body:     openai.NewEngineError(status, "", fmt.Sprintf("the engine answered %d %s", status, http.StatusText(status))),
		Upstream: strings.ToValidUTF8(string(raw), "\uFFFD")}
}

// retryAfterOf is an answer's Retry-After in whole seconds, if it has one.
func retryAfterOf(resp *http.Response) time.Duration {
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	return 0
}

// httpStream reads an engine's SSE answer.
type httpStream struct {
	// read reads each event (ParseEvent, or the agent's Classify).
	read   func([]byte) dispatch.Event
	body   io.ReadCloser
	cancel context.CancelFunc
	sse    *openai.SSEReader
	// trace is the request's id until its first token is read, in a
	// build that traces hops; empty otherwise.
	trace hoptrace.Tag
	// text holds the last event made valid UTF-8, when the engine's was
	// not; an event is valid only until the next Recv.
	text      []byte
	done      bool
	closeOnce sync.Once
}

func (s *httpStream) Recv() (dispatch.Event, error) {
	if s.done {
		return dispatch.Event{}, io.EOF
	}
	data, err := s.sse.Next()
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return dispatch.Event{}, fmt.Errorf("%w: engine closed the stream before [DONE]", dispatch.ErrStreamBroken)
		}
		return dispatch.Event{}, fmt.Errorf("%w: %v", dispatch.ErrStreamBroken, err)
	}
	if openai.IsDone(data) {
		s.done = true
		s.drain()
		return dispatch.Event{}, io.EOF
	}
	if !utf8.Valid(data) {
		s.text = AppendValidUTF8(s.text[:0], data)
		data = s.text
	}
	ev := s.read(data)
	if hoptrace.On && ev.Tokens > 0 && s.trace.ID() != "" {
		hoptrace.Mark(s.trace.ID(), hoptrace.EngineFirstRead)
		s.trace.Set("")
	}
	return ev, nil
}

// drainLimit and drainWait bound the read of what follows [DONE]: the end
// of the chunked body, a few bytes that arrive with it.
const (
	drainLimit = 4 << 10
	drainWait  = time.Second
)

// drain reads the body's end after [DONE], so the connection goes back to
// the client's pool instead of being closed: the next request to the
// engine then costs no new connection. An engine that keeps the body open
// after [DONE] is cut off after drainWait.
func (s *httpStream) drain() {
	stop := time.AfterFunc(drainWait, s.cancel)
	_, _ = io.Copy(io.Discard, io.LimitReader(s.body, drainLimit))
	stop.Stop()
}

func (s *httpStream) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.body.Close()
	})
	return nil
}

// ParseEvent is the platform's one reading of an engine event: it
// classifies the payload (an error, the final usage, a running usage,
// output), counts the text it carries, tells whether it repeats a key,
// and locates what the gateway rewrites in it. Every hop after it carries
// the answer typed (dispatch.Event); none reads the event again.
//
// It reads what the event's JSON means, however the engine spells it
// (Python's json.dumps writes "usage": {…}, other engines indent or order
// keys their own way): the event is read in place in one checking pass
// (scan.go), and decoded with encoding/json only when that pass cannot
// tell.
func ParseEvent(data []byte) dispatch.Event {
	counted()
	ev := Classify(data)
	dup, ok := jsonscan.DuplicateKey(data)
	// Too deep to check is a duplicate too: no engine nests that deep.
	ev.Duplicate = dup || !ok && json.Valid(data)
	if !ev.Duplicate && ev.Err == nil {
		ev.ModelValue, ev.UsageValue, ev.UsageMember = locate(data)
	}
	return ev
}

// Classify is what an event tells: an error, the final usage, a running
// usage, output and its text; ParseEvent without the checks and places
// only the gateway needs. The node agent reads its engine's events with
// it for its own done record, which the platform does not trust: the
// platform's one reading of each event is ParseEvent, at the orchestrator.
func Classify(data []byte) dispatch.Event {
	ev := dispatch.Event{Data: data}
	if e := openai.StreamError(data); e != nil {
		ev.Err = e
		return ev
	}
	r, ok := readEvent(data)
	if !ok {
		r = decodeEvent(data)
	}
	if r.usage != nil {
		if r.noChoices {
			ev.Usage = r.usage // the final usage chunk
			return ev
		}
		ev.Progress = r.usage // a running count on an output chunk
	}
	if r.output {
		ev.Tokens = 1
		ev.Text, ev.Calls = r.said.text, r.said.calls
	}
	return ev
}

// decodeEvent is readEvent by encoding/json, for the events it leaves: the
// usage and the choices are decoded apart, so that a usage of an odd shape
// still leaves the choices read. An event that is not JSON tells nothing
// but, when it looks like a content chunk, one token: it is relayed as it
// came, and billed as what it shows.
func decodeEvent(data []byte) eventRead {
	var c struct {
		Choices json.RawMessage `json:"choices"`
		Usage   json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(data, &c) != nil {
		return eventRead{output: looksLikeContent(data)}
	}
	var r eventRead
	if len(c.Usage) > 0 && !jsonscan.IsNull(c.Usage) {
		var u openai.Usage
		if json.Unmarshal(c.Usage, &u) == nil {
			r.usage = &u
		}
	}
	r.noChoices = jsonscan.IsEmptyArray(c.Choices)
	r.output, r.said = hasOtherOutput(c.Choices)
	return r
}

// looksLikeContent reports whether bytes that are not JSON hold a
// "content" key with a string value that is not empty, spaces around its
// colon allowed.
func looksLikeContent(data []byte) bool {
	const key = `"content"`
	for rest := data; ; {
		i := bytes.Index(rest, []byte(key))
		if i < 0 {
			return false
		}
		rest = rest[i+len(key):]
		j := skipSpace(rest, 0)
		if j >= len(rest) || rest[j] != ':' {
			continue
		}
		j = skipSpace(rest, j+1)
		if j+1 < len(rest) && rest[j] == '"' && rest[j+1] != '"' {
			return true
		}
	}
}

// skipSpace returns the index of the first byte at or after i in b that is
// not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// hasOtherOutput reports whether a chunk's choices carry generated output
// in a delta: content, tool calls, reasoning, a refusal, anything but the
// role that is not empty. Such chunks cost the engine tokens like content
// does, so a client that drops a tool-call stream pays for what it
// received. It also counts what the output says (said). Only the deltas'
// members are decoded.
func hasOtherOutput(choices json.RawMessage) (bool, said) {
	if len(choices) == 0 {
		return false, said{}
	}
	if found, sd, ok := otherOutput(choices); ok {
		return found, sd
	}
	var c []struct {
		Delta map[string]json.RawMessage `json:"delta"`
	}
	if json.Unmarshal(choices, &c) != nil {
		return false, said{}
	}
	found, sd := false, said{}
	for _, ch := range c {
		for k, v := range ch.Delta {
			if k != "role" && !emptyValue(bytes.TrimSpace(v)) {
				found = true
			}
			sd.add(saidByDecode(k, v))
		}
	}
	return found, sd
}

// saidByDecode is what one delta member says, read as encoding/json reads
// it (saysOutput in place): a text member's string; the calls of
// tool_calls, each decoded apart, a call that does not decode saying
// nothing.
func saidByDecode(key string, v json.RawMessage) said {
	var sd said
	switch key {
	case textNames[0], textNames[1], textNames[2], textNames[3]:
		if t, ok := tokens.TextOfJSON(bytes.TrimSpace(v)); ok {
			sd.text = t
		}
	case toolCallsName:
		var calls []json.RawMessage
		if json.Unmarshal(v, &calls) != nil {
			return said{}
		}
		for _, c := range calls {
			var call struct {
				Function json.RawMessage `json:"function"`
			}
			if json.Unmarshal(c, &call) == nil {
				sd.add(functionByDecode(call.Function))
			}
		}
	case functionCallName:
		sd = functionByDecode(v)
	}
	return sd
}

// functionByDecode is functionOutput by encoding/json.
func functionByDecode(fn json.RawMessage) said {
	var f struct {
		Name      json.RawMessage `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	var sd said
	if len(fn) == 0 || json.Unmarshal(fn, &f) != nil {
		return sd
	}
	if t, ok := tokens.TextOfJSON(f.Name); ok {
		sd.text = t
		if t.Bytes > 0 {
			sd.calls = 1
		}
	}
	if t, ok := tokens.TextOfJSON(f.Arguments); ok {
		sd.text.Add(t)
	}
	return sd
}

// MaxIdleEngineConns is how many idle connections an engine client keeps
// per engine: one per stream an engine runs at once (vLLM's max-num-seqs
// defaults to 256, up to 1024 on large GPUs), so a busy engine never costs
// a new connection per request. Go's default keeps two.
const MaxIdleEngineConns = 1024

// EngineIdleConnTimeout closes an engine connection that has been idle
// this long. It must be shorter than the engine's own keep-alive timeout
// (vLLM's API server closes idle connections after 5 s): a request sent on
// a connection the engine is closing fails, and Go does not retry a POST
// once it is written.
const EngineIdleConnTimeout = 3 * time.Second

// NewEngineClient returns a client for engines and orchestrators: no
// overall timeout (a stream lasts as long as its answer; contexts end it)
// and an idle pool sized for many concurrent streams to one host.
func NewEngineClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0 // no limit across hosts
	tr.MaxIdleConnsPerHost = MaxIdleEngineConns
	tr.IdleConnTimeout = EngineIdleConnTimeout
	return &http.Client{Transport: tr}
}
