package provider

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// fault is what faultProxy does with one request.
type fault int

const (
	// pass forwards the request and its answer.
	pass fault = iota
	// dropAnswer forwards the request, so the platform commits it, and
	// answers 502 instead of the platform's answer: a load balancer that
	// lost the answer.
	dropAnswer
	// notReady answers 503 without forwarding: a gateway not up yet behind
	// its load balancer.
	notReady
	// serverError answers 500 without forwarding: a failure the client does
	// not retry.
	serverError
	// processKilled forwards the request, so the platform commits it, and
	// answers 500, which the client does not retry: the apply ends without
	// the answer, as when terraform is killed after the commit.
	processKilled
)

// errAnswerDropped is the error that makes the reverse proxy answer 502.
var errAnswerDropped = errors.New("answer dropped by the test's proxy")

// errAnswerKilled is the error that makes the reverse proxy answer 500.
var errAnswerKilled = errors.New("answer replaced by a failure by the test's proxy")

// faultProxy sits between the provider and the platform and does to each
// request what decide says; decide sees requests one at a time, in order.
type faultProxy struct {
	URL string

	mu     sync.Mutex
	decide func(r *http.Request) fault
	counts map[fault]int
}

// newFaultProxy starts a proxy to base.
func newFaultProxy(t *testing.T, base string, decide func(r *http.Request) fault) *faultProxy {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	fp := &faultProxy{decide: decide, counts: map[fault]int{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		switch resp.Request.Header.Get("X-Test-Fault") {
		case "drop":
			return errAnswerDropped
		case "kill":
			return errAnswerKilled
		}
		return nil
	}
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		if errors.Is(err, errAnswerKilled) {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fp.mu.Lock()
		f := fp.decide(r)
		fp.counts[f]++
		fp.mu.Unlock()
		switch f {
		case notReady:
			http.Error(w, "no healthy target", http.StatusServiceUnavailable)
			return
		case serverError:
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		case dropAnswer:
			r.Header.Set("X-Test-Fault", "drop")
		case processKilled:
			r.Header.Set("X-Test-Fault", "kill")
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	fp.URL = srv.URL
	return fp
}

// count is how many requests got f.
func (fp *faultProxy) count(f fault) int {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return fp.counts[f]
}

// providerBlockVia configures the provider for p through the proxy at
// base, with extra settings.
func (p *platform) providerBlockVia(base, extra string) string {
	return providerBlockAt(base, p.token, extra)
}

// providerBlockAt configures the provider for endpoint and token, with
// extra settings.
func providerBlockAt(endpoint, token, extra string) string {
	return fmt.Sprintf("provider \"llmplat\" {\n  endpoint = %q\n  token    = %q\n%s}\n", endpoint, token, extra)
}
