package twin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The retry policy of the OpenAI SDKs (Python and Node, generated from
// one specification; Anthropic's share it): up to sdkMaxRetries retries of
// a connection error, 408, 409, 429 or any 5xx; a Retry-After header is
// obeyed only when it asks for at most sdkMaxRetryAfter, else the wait is
// sdkInitialDelay doubled per retry, at most sdkMaxDelay, less up to a
// quarter of jitter.
const (
	sdkMaxRetries = 2
	// sdkTimeout is the SDKs' default request timeout, until the
	// response's headers (Node) or between two reads (Python): a stream
	// that has begun is not timed out while it sends.
	sdkTimeout       = 10 * time.Minute
	sdkMaxRetryAfter = 60 * time.Second
	sdkInitialDelay  = 500 * time.Millisecond
	sdkMaxDelay      = 8 * time.Second
)

// SDK is a client that sends as the OpenAI SDKs do, on the twin's clock:
// its real-world waits and limits divided by the time scale.
type SDK struct {
	c          *Cluster
	URL, Key   string
	MaxRetries int
	HTTP       *http.Client
}

// NewSDK returns an SDK client of base URL url with API key key and the
// SDKs' default retries.
func (c *Cluster) NewSDK(url, key string) *SDK {
	return &SDK{c: c, URL: url, Key: key, MaxRetries: sdkMaxRetries, HTTP: &http.Client{}}
}

// StreamChat sends a streamed chat completion of prompt to model, with
// the SDK's retries, and reports it on tl (if not nil) as it ends.
func (s *SDK) StreamChat(ctx context.Context, tl *Timeline, model, prompt string, maxTokens int) Request {
	body, _ := json.Marshal(map[string]any{"model": model, "stream": true, "max_tokens": maxTokens,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	r := Request{Model: model}
	start := time.Now()
	if tl != nil {
		r.Sent = tl.Now()
	}
	for attempt := 0; ; attempt++ {
		r.Attempts = attempt + 1
		status, retryAfter, first, err := s.once(ctx, body)
		r.Status, r.Err = status, ""
		if err != nil {
			r.Err = err.Error()
		}
		if status == http.StatusOK && err == nil {
			if tl != nil {
				r.FirstToken = r.Sent + first.Sub(start)
			}
			break
		}
		if attempt >= s.MaxRetries || !sdkRetries(status, err) {
			break
		}
		wait := s.retryWait(attempt, retryAfter)
		select {
		case <-ctx.Done():
			r.Err = ctx.Err().Error()
			return r
		case <-time.After(wait):
		}
	}
	if tl != nil {
		r.Ended = r.Sent + time.Since(start)
		tl.Add(r)
	}
	return r
}

// errSDKTimeout is an attempt the SDK's timeout ended.
var errSDKTimeout = errors.New("request timed out (the SDK's 10-minute timeout)")

// sdkRetries is the SDKs' choice of what to retry.
func sdkRetries(status int, err error) bool {
	if status == 0 {
		return err != nil // no answer: a connection error
	}
	return status == 408 || status == 409 || status == 429 || status >= 500
}

// retryWait is the SDKs' wait before retry attempt+1, on the twin's
// clock.
func (s *SDK) retryWait(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 && s.c.Real(retryAfter) <= sdkMaxRetryAfter {
		return retryAfter
	}
	backoff := min(sdkInitialDelay*time.Duration(1<<attempt), sdkMaxDelay)
	jitter := 1 - 0.25*rand.Float64()
	return s.c.Dur(time.Duration(float64(backoff) * jitter))
}

// once sends body and reads the stream to its first token; it returns
// the status, the Retry-After asked for, and when the first token came.
func (s *SDK) once(ctx context.Context, body []byte) (int, time.Duration, time.Time, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timeout := time.AfterFunc(s.c.Dur(sdkTimeout), func() { cancel(errSDKTimeout) })
	defer timeout.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	req.Header.Set("Authorization", "Bearer "+s.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.HTTP.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errSDKTimeout) {
			err = cause
		}
		return 0, 0, time.Time{}, err // a connection error or the timeout: both retried
	}
	timeout.Stop()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		var ra time.Duration
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			ra = time.Duration(secs) * time.Second
		}
		return resp.StatusCode, ra, time.Time{}, fmt.Errorf("%d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	sc := bufio.NewScanner(resp.Body)
	var first time.Time
	finished := false
	for sc.Scan() {
		line := sc.Text()
		if first.IsZero() && strings.HasPrefix(line, "data: {") && strings.Contains(line, `"content"`) {
			first = time.Now()
		}
		if strings.Contains(line, `"error"`) {
			return resp.StatusCode, 0, first, fmt.Errorf("error in the stream: %s", line)
		}
		finished = finished || finishes(line)
		if line == "data: [DONE]" {
			switch {
			case first.IsZero():
				return resp.StatusCode, 0, first, fmt.Errorf("a stream without content")
			case !finished:
				// An answer cut short: the application has a part of it.
				return resp.StatusCode, 0, first, fmt.Errorf("a stream without a finish reason")
			}
			return resp.StatusCode, 0, first, nil
		}
	}
	if err := sc.Err(); err != nil {
		return resp.StatusCode, 0, first, err
	}
	return resp.StatusCode, 0, first, fmt.Errorf("the stream ended before [DONE]")
}

// finishes reports whether an event line of a stream is a chunk that
// ends its answer: one with a finish reason.
func finishes(line string) bool {
	data, ok := strings.CutPrefix(line, "data: ")
	if !ok || !strings.Contains(data, `"finish_reason"`) {
		return false
	}
	var chunk struct {
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal([]byte(data), &chunk) != nil {
		return false
	}
	for _, c := range chunk.Choices {
		if c.FinishReason != nil && *c.FinishReason != "" {
			return true
		}
	}
	return false
}
