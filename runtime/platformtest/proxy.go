package platformtest

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/hoptrace"
)

// Proxy is the floor the benchmarks measure the platform against: a bare
// reverse proxy to upstream that flushes every event as it comes, as any
// streaming proxy must.
func Proxy(upstream *url.URL) http.Handler {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 0, 2048
	p := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(upstream) }, FlushInterval: -1, Transport: tr,
		// A client that left (a closed loop's end) is no proxy error; any
		// other error is logged as the default handler does, and the
		// client sees it as a failed request.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				log.Printf("http: proxy error: %v", err)
			}
			w.WriteHeader(http.StatusBadGateway)
		}}
	return fullDuplex(p)
}

// fullDuplex lets h read the request's body after it began the response.
// Without it a ReverseProxy in front of an engine loses streams: the engine
// has the whole body and answers before the proxy's transport makes its
// last read of the inbound body (the one that finds its end); writing the
// answer's headers makes net/http's HTTP/1 server drain and close that
// body, the late read fails ("invalid Read on closed Body"), and the
// transport tears down the upstream connection under the stream it is
// relaying ("use of closed network connection"; the Go issue 40747). Any
// server that answers once it has the request, as vLLM does, triggers it.
func fullDuplex(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex() // HTTP/1 supports it; HTTP/2 is full duplex already
		if hoptrace.On {
			w, r = traceProxy(w, r)
		}
		h.ServeHTTP(w, r)
	})
}

// traceProxy marks the proxy's hops of a traced request (hoptrace): its
// handler's start, and the flush of the first write that carries a token.
// It reads the body first, for the trace key.
func traceProxy(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	start := hoptrace.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return w, r
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	key := hoptrace.Key(body)
	hoptrace.MarkAt(key, hoptrace.RelayIn, start)
	return &tokenFlushWriter{ResponseWriter: w, flushed: func() { hoptrace.Mark(key, hoptrace.RelayWrote) }}, r
}

// tokenFlushWriter calls flushed after the first flush that follows a
// write of a server-sent event with a token.
type tokenFlushWriter struct {
	http.ResponseWriter
	flushed       func()
	pending, done bool
}

func (w *tokenFlushWriter) Write(p []byte) (int, error) {
	if !w.done && !w.pending {
		for ev := range bytes.SplitSeq(p, []byte("\n\n")) {
			if data, ok := bytes.CutPrefix(bytes.TrimSpace(ev), []byte("data: ")); ok && engineclient.ParseEvent(data).Tokens > 0 {
				w.pending = true
				break
			}
		}
	}
	return w.ResponseWriter.Write(p)
}

func (w *tokenFlushWriter) FlushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if w.pending {
		w.pending, w.done = false, true
		w.flushed()
	}
	return err
}

func (w *tokenFlushWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
