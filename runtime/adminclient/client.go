package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/openai"
)

// Client defaults and bounds, each with its reason.
const (
	// DefaultMaxAttempts is the first try plus three retries: with the
	// delays below that rides out about 5 s of a replica restarting.
	DefaultMaxAttempts = 4
	// DefaultBaseDelay is the first retry's backoff ceiling.
	DefaultBaseDelay = 250 * time.Millisecond
	// DefaultMaxDelay caps one backoff, and a server's Retry-After.
	DefaultMaxDelay = 5 * time.Second
	// maxResponseBytes bounds an answer: a list of thousands of keys or
	// nodes is a few MiB.
	maxResponseBytes = 32 << 20
	// maxErrorBytes bounds an error body, which is a few hundred bytes.
	maxErrorBytes = 64 << 10
)

// RetryPolicy bounds the Client's retries: full-jitter exponential
// backoff, uniform in [0, min(MaxDelay, BaseDelay·2ⁿ)), or the server's
// Retry-After when it says more (capped at MaxDelay).
type RetryPolicy struct {
	// MaxAttempts counts every try, the first included; 1 disables retries.
	MaxAttempts int
	BaseDelay   time.Duration
	MaxDelay    time.Duration
}

// Client calls the admin API. Every admin call is safe to retry by design
// (creates are idempotent by name, idempotency key or Idempotency-Key;
// updates set values; revokes and drains repeat harmlessly; a repeated
// rotate returns a newer working secret), so the Client retries each on
// connection errors, on an answer cut short, and on 429, 502, 503 and 504
// (the API answers outages with 503; a 500 would fail again). It never
// logs, and its errors never contain the token or a secret.
//
// The retry loop is go-retryablehttp's (it rewinds the body and waits on
// the context); this package supplies the three parts its defaults get
// wrong for the admin API: which failures to repeat (its default policy
// repeats a 500, and not a 2xx answer cut short, which is decoded here
// inside the loop), the backoff (its default has no jitter and obeys a
// 429's or 503's Retry-After without a cap; here full jitter, a
// Retry-After on any retried status, capped at MaxDelay), and the error
// when the context ends during a wait (it returns the context's error
// alone; here the last try's refusal is kept beside it).
type Client struct {
	base  string // without a trailing slash
	token string
	hc    *http.Client
	// Retry bounds the retries; NewClient sets the defaults.
	Retry RetryPolicy

	// wait maps a backoff to the time actually waited; tests record the
	// backoff and wait less.
	wait   func(ctx context.Context, d time.Duration) time.Duration
	jitter func(n int64) int64 // uniform in [0, n)
}

// NewClient returns a client for the admin API at baseURL (the server's
// root, without /admin) that authenticates with token. A nil httpClient
// means http.DefaultClient.
func NewClient(baseURL, token string, httpClient *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("admin client: base url must be http(s)://host[:port][/path]")
	}
	if token == "" {
		return nil, errors.New("admin client: a token is required")
	}
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	// A copy, so the caller's client keeps its own redirect policy.
	hc := *httpClient
	hc.CheckRedirect = refuseRedirect
	return &Client{
		base: strings.TrimSuffix(u.String(), "/"), token: token, hc: &hc,
		Retry:  RetryPolicy{MaxAttempts: DefaultMaxAttempts, BaseDelay: DefaultBaseDelay, MaxDelay: DefaultMaxDelay},
		wait:   func(_ context.Context, d time.Duration) time.Duration { return d },
		jitter: rand.Int64N,
	}, nil
}

// String names the client without its token, so printing it leaks nothing.
func (c *Client) String() string { return "adminclient.Client(" + c.base + ")" }

// GoString is String, for %#v.
func (c *Client) GoString() string { return c.String() }

// call is one admin API request.
type call struct {
	method, path string
	query        url.Values
	body         any         // marshalled to JSON when not nil
	header       http.Header // extra headers
	out          any         // decoded from a 2xx body when not nil
	// giveUp, when set, stops the retries after a try that failed with an
	// error it accepts, though the error is retryable.
	giveUp func(error) bool
}

// do sends cl, retrying as the policy allows, and returns the final
// status. A refusal is an *adminwire.APIError.
func (c *Client) do(ctx context.Context, cl call) (int, error) {
	return c.send(ctx, cl, max(c.Retry.MaxAttempts, 1))
}

// send sends cl in up to attempts tries and returns the final status. When
// ctx ends first the error wraps both ctx's cause and the last try's error.
func (c *Client) send(ctx context.Context, cl call, attempts int) (int, error) {
	req, err := c.request(ctx, cl)
	if err != nil {
		return 0, err
	}
	var last error // the latest try's failure; nil after a success
	rc := &retryablehttp.Client{
		HTTPClient: c.hc,
		RetryMax:   attempts - 1,
		CheckRetry: func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			last = c.failure(cl, resp, err)
			if last != nil && cl.giveUp != nil && cl.giveUp(last) {
				return false, nil
			}
			return last != nil && retryable(last) && ctx.Err() == nil, nil
		},
		Backoff: func(_, _ time.Duration, n int, resp *http.Response) time.Duration {
			return c.wait(ctx, c.backoff(n+1, retryAfter(resp)))
		},
		// The last answer comes back as it is: send turns it into the
		// error, and closes it.
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	resp, err := rc.Do(req)
	status := 0
	if resp != nil {
		status = resp.StatusCode
		defer resp.Body.Close()
	}
	switch {
	case err == nil && last == nil:
		return status, nil
	case last != nil && !retryable(last): // a refusal
		return status, last
	case ctx.Err() != nil && last != nil:
		return status, fmt.Errorf("admin api %s %s: %w; last try: %w", cl.method, cl.path, context.Cause(ctx), last)
	case ctx.Err() != nil:
		return status, fmt.Errorf("admin api %s %s: %w", cl.method, cl.path, context.Cause(ctx))
	case last != nil:
		return status, last
	}
	return status, fmt.Errorf("admin api %s %s: %w", cl.method, cl.path, err)
}

// request builds cl's request; its body is replayed on every try.
func (c *Client) request(ctx context.Context, cl call) (*retryablehttp.Request, error) {
	var body []byte
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return nil, fmt.Errorf("admin api %s %s: encode request: %w", cl.method, cl.path, err)
		}
		body = b
	}
	target := c.base + cl.path
	if len(cl.query) > 0 {
		target += "?" + cl.query.Encode()
	}
	var raw any // retryablehttp wants an untyped nil for no body
	if body != nil {
		raw = body
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, cl.method, target, raw)
	if err != nil {
		return nil, fmt.Errorf("admin api %s %s: %w", cl.method, cl.path, err)
	}
	for k, vs := range cl.header {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// A 2xx answer is decoded inside the loop, so that one cut short is
	// retried like a lost connection.
	req.SetResponseHandler(func(resp *http.Response) error {
		if resp.StatusCode < 200 || resp.StatusCode > 299 || cl.out == nil || resp.StatusCode == http.StatusNoContent {
			return nil
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(cl.out); err != nil {
			return &transportError{err: fmt.Errorf("admin api %s %s: decode answer: %w", cl.method, cl.path, err)}
		}
		return nil
	})
	return req, nil
}

// failure is the error of one try: err when the try failed (the
// connection, or decoding the answer), a refusal decoded from a non-2xx
// answer, or nil for a success. A refusal's body is read and put back, so
// that reading it twice gives the same error.
func (c *Client) failure(cl call, resp *http.Response, err error) error {
	var te *transportError
	switch {
	case errors.As(err, &te):
		return err
	case errors.Is(err, ErrRedirect):
		// Not a transport error: a retry would meet the same redirect.
		return fmt.Errorf("admin api %s %s: %w", cl.method, cl.path, err)
	case err != nil:
		return &transportError{err: fmt.Errorf("admin api %s %s: %w", cl.method, cl.path, err)}
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return decodeAPIError(resp.StatusCode, b)
}

// transportError is a failure to reach the server or read its answer: the
// request may or may not have been applied, so it is retried.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// retryable reports whether a try that failed with err may be repeated.
func retryable(err error) bool {
	var te *transportError
	if errors.As(err, &te) {
		return true
	}
	var ae *adminwire.APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		// Not 500: the server answers outages with 503, so a 500 is a
		// failure of this request that a retry would repeat.
		case http.StatusTooManyRequests, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
	}
	return false
}

// backoff is the wait before try n+1: full jitter, or the server's advice
// when longer, never above MaxDelay.
func (c *Client) backoff(n int, retryAfter time.Duration) time.Duration {
	ceiling := c.Retry.MaxDelay
	if shift := n - 1; shift < 30 && c.Retry.BaseDelay<<shift < ceiling {
		ceiling = c.Retry.BaseDelay << shift
	}
	d := time.Duration(0)
	if ceiling > 0 {
		d = time.Duration(c.jitter(int64(ceiling)))
	}
	if retryAfter > d {
		d = retryAfter
	}
	return min(d, c.Retry.MaxDelay)
}

// retryAfter reads the Retry-After of resp in whole seconds; 0 when there
// is no answer or no advice.
func retryAfter(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After")))
	if err != nil || s < 0 || s > math.MaxInt32 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// decodeAPIError turns an error answer into an *adminwire.APIError; a body
// that is not the OpenAI shape (a proxy's page) keeps the status and a
// short note.
func decodeAPIError(status int, body []byte) *adminwire.APIError {
	e := &adminwire.APIError{Status: status, Message: http.StatusText(status)}
	var eb openai.ErrorBody
	if json.Unmarshal(body, &eb) != nil || eb.Error.Message == "" {
		return e
	}
	e.Type, e.Message = eb.Error.Type, eb.Error.Message
	if eb.Error.Param != nil {
		e.Param = *eb.Error.Param
	}
	var code string
	if json.Unmarshal(eb.Error.Code, &code) == nil {
		e.Code = code
	} else if n := eb.Error.Status(); n != 0 {
		e.Code = strconv.Itoa(n)
	}
	return e
}

// ErrRedirect is a redirect the Client refused: the admin API never
// redirects, so one comes from something else on the way, and following it
// would send the admin token where it points.
var ErrRedirect = errors.New("admin client: refused a redirect (the admin api never redirects)")

// refuseRedirect is the Client's CheckRedirect: Go's client would follow a
// redirect to another port of the same host with the Authorization header
// (it drops the header only when the host name changes), so none is
// followed.
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("%w to %s", ErrRedirect, req.URL.Redacted())
}
