package costreport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const (
	// promQueryTimeout bounds one query: Prometheus's own default
	// query.timeout, past which the server gives up anyway.
	promQueryTimeout = 2 * time.Minute
	// promMaxBody bounds a response read into memory: a vector per model is
	// a few kilobytes, so anything near this is not an answer to our queries.
	promMaxBody = 16 << 20
)

// ErrPrometheus is returned when Prometheus answers a query with an error,
// or with something that is not an instant vector.
var ErrPrometheus = errors.New("prometheus query failed")

// PromClient queries Prometheus's HTTP API (/api/v1/query).
type PromClient struct {
	// BaseURL is the server's address, e.g. "http://prometheus:9090".
	BaseURL string
	// HTTP sends the requests; nil means http.DefaultClient.
	HTTP *http.Client
}

// Sample is one element of an instant vector.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// promResponse is the API's envelope for an instant query.
type promResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// Query evaluates an instant query at a time and returns its vector.
// Samples whose value is NaN (no data) are left out.
func (c *PromClient) Query(ctx context.Context, query string, at time.Time) ([]Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, promQueryTimeout)
	defer cancel()
	u, err := url.Parse(strings.TrimSuffix(c.BaseURL, "/") + "/api/v1/query")
	if err != nil {
		return nil, fmt.Errorf("prometheus url: %w", err)
	}
	form := url.Values{"query": {query}, "time": {at.UTC().Format(time.RFC3339Nano)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("prometheus request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prometheus query: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, promMaxBody))
	if err != nil {
		return nil, fmt.Errorf("prometheus query: read answer: %w", err)
	}
	return parseVector(resp.StatusCode, body)
}

// parseVector decodes an instant query's answer.
func parseVector(status int, body []byte) ([]Sample, error) {
	var r promResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%w: HTTP %d, not the API's JSON: %w", ErrPrometheus, status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%w: HTTP %d, %s: %s", ErrPrometheus, status, r.ErrorType, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("%w: result type %q, want vector", ErrPrometheus, r.Data.ResultType)
	}
	out := make([]Sample, 0, len(r.Data.Result))
	for _, e := range r.Data.Result {
		s, ok := e.Value[1].(string)
		if !ok {
			return nil, fmt.Errorf("%w: sample value %v is not a string", ErrPrometheus, e.Value[1])
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: sample value: %w", ErrPrometheus, err)
		}
		if math.IsNaN(v) {
			continue
		}
		out = append(out, Sample{Labels: e.Metric, Value: v})
	}
	return out, nil
}
