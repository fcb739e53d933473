package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

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
// connection errors and on 429, 502, 503 and 504 (the API answers outages
// with 503; a 500 would fail again). It never logs, and
// its errors never contain the token or a secret.
type Client struct {
	base  string // without a trailing slash
	token string
	hc    *http.Client
	// Retry bounds the retries; NewClient sets the defaults.
	Retry RetryPolicy

	sleep  func(ctx context.Context, d time.Duration) error // injected by tests
	jitter func(n int64) int64                              // uniform in [0, n)
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
	return &Client{
		base: strings.TrimSuffix(u.String(), "/"), token: token, hc: httpClient,
		Retry:  RetryPolicy{MaxAttempts: DefaultMaxAttempts, BaseDelay: DefaultBaseDelay, MaxDelay: DefaultMaxDelay},
		sleep:  sleepCtx,
		jitter: rand.Int64N,
	}, nil
}

// String names the client without its token, so printing it leaks nothing.
func (c *Client) String() string { return "adminclient.Client(" + c.base + ")" }

// GoString is String, for %#v.
func (c *Client) GoString() string { return c.String() }

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call is one admin API request.
type call struct {
	method, path string
	query        url.Values
	body         any         // marshalled to JSON when not nil
	header       http.Header // extra headers
	out          any         // decoded from a 2xx body when not nil
}

// do sends cl, retrying as the policy allows, and returns the final
// status. A refusal is an *APIError.
func (c *Client) do(ctx context.Context, cl call) (int, error) {
	var body []byte
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return 0, fmt.Errorf("admin api %s %s: encode request: %w", cl.method, cl.path, err)
		}
		body = b
	}
	target := c.base + cl.path
	if len(cl.query) > 0 {
		target += "?" + cl.query.Encode()
	}
	attempts := max(c.Retry.MaxAttempts, 1)
	for n := 1; ; n++ {
		status, retryAfter, err := c.once(ctx, cl, target, body)
		if err == nil || n >= attempts || !retryable(err) || ctx.Err() != nil {
			return status, err
		}
		if err := c.sleep(ctx, c.backoff(n, retryAfter)); err != nil {
			return status, fmt.Errorf("admin api %s %s: %w", cl.method, cl.path, err)
		}
	}
}

// once sends one try of cl and returns its status and the server's
// Retry-After advice.
func (c *Client) once(ctx context.Context, cl call, target string, body []byte) (int, time.Duration, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, target, rd)
	if err != nil {
		return 0, 0, fmt.Errorf("admin api %s %s: %w", cl.method, cl.path, err)
	}
	for k, vs := range cl.header {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, 0, &transportError{err: fmt.Errorf("admin api %s %s: %w", cl.method, cl.path, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if cl.out == nil || resp.StatusCode == http.StatusNoContent {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
			return resp.StatusCode, 0, nil
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(cl.out); err != nil {
			return resp.StatusCode, 0, &transportError{err: fmt.Errorf("admin api %s %s: decode answer: %w", cl.method, cl.path, err)}
		}
		return resp.StatusCode, 0, nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	return resp.StatusCode, parseRetryAfter(resp.Header.Get("Retry-After")), decodeAPIError(resp.StatusCode, b)
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

// parseRetryAfter reads a Retry-After of whole seconds; 0 when absent.
func parseRetryAfter(v string) time.Duration {
	s, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// decodeAPIError turns an error answer into an *APIError; a body that is
// not the OpenAI shape (a proxy's page) keeps the status and a short note.
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
