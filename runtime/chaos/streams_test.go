package chaos_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/platformtest"
)

// outcome is how one client's request ended.
type outcome struct {
	// status is the HTTP status (0: no answer); body the answer's body when
	// it was not a 200.
	status int
	body   string
	// retryAfter is the Retry-After header.
	retryAfter string
	// chunks counts content chunks; errEvent is an error event's code, if
	// one came; done is true when the stream ended with [DONE]; usage
	// whether the usage chunk came.
	chunks int
	// completion is the usage's completion tokens.
	completion int64
	errEvent   string
	done       bool
	usage      bool
	err        error
	// ttft is when the first content chunk came; took when the answer
	// ended.
	ttft, took time.Duration
}

// whole reports a stream that ended as a finished answer: [DONE], its
// usage, content, and no error event.
func (o outcome) whole() bool {
	return o.status == http.StatusOK && o.done && o.usage && o.chunks > 0 && o.errEvent == ""
}

// streams is a set of streamed requests sent at once.
type streams struct {
	started sync.WaitGroup
	wg      sync.WaitGroup
	mu      sync.Mutex
	outs    []outcome
}

// openStreams sends n streamed requests of maxTokens with key. Each is
// counted as started at its first content chunk or at its end.
func openStreams(ctx context.Context, client *http.Client, url, key, tag string, n, maxTokens int) *streams {
	s := &streams{outs: make([]outcome, n)}
	s.started.Add(n)
	for i := range n {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			once := sync.OnceFunc(s.started.Done)
			defer once()
			body := fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":%d,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"%s %d"}]}`,
				model, maxTokens, tag, i)
			o := send(ctx, client, url, key, body, once)
			s.mu.Lock()
			s.outs[i] = o
			s.mu.Unlock()
		}()
	}
	return s
}

// waitStarted returns once every stream has streamed content or ended.
func (s *streams) waitStarted() { s.started.Wait() }

// wait returns every stream's outcome once all have ended.
func (s *streams) wait() []outcome {
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.outs
}

// send posts body with key and reads the answer to its end; firstChunk,
// if set, runs at the first content chunk of a stream.
func send(ctx context.Context, client *http.Client, url, key, body string, firstChunk func()) outcome {
	start := time.Now()
	resp, err := post(ctx, client, url, key, body)
	if err != nil {
		return outcome{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	o := outcome{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		o.body, o.took = string(b), time.Since(start)
		return o
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A non-streamed answer: whole when it came with its usage.
		b, err := io.ReadAll(resp.Body)
		o.err, o.took = err, time.Since(start)
		o.done, o.usage = err == nil, strings.Contains(string(b), `"usage":{`)
		o.chunks = strings.Count(string(b), `"content":"`)
		return o
	}
	r := openai.NewSSEReader(resp.Body)
	for {
		data, err := r.Next()
		if err != nil {
			if err != io.EOF {
				o.err = err
			}
			break
		}
		if openai.IsDone(data) {
			o.done = true
			break
		}
		ev := engineclient.ParseEvent(data)
		switch {
		case ev.Err != nil:
			o.errEvent = cmp.Or(strings.Trim(string(ev.Err.Code), `"`), ev.Err.Type, "error")
		case ev.Usage != nil:
			o.usage, o.completion = true, ev.Usage.CompletionTokens
		case ev.Tokens > 0:
			o.chunks++
			if o.chunks == 1 {
				o.ttft = time.Since(start)
				if firstChunk != nil {
					firstChunk()
				}
			}
		}
	}
	o.took = time.Since(start)
	return o
}

// shortBody is a non-streamed request to model for a few tokens.
func shortBody(model, tag string, i int) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":3,"messages":[{"role":"user","content":"%s %d"}]}`, model, tag, i)
}

// tenant makes team "t" with ample credit and its key "k", with the
// limits req asks, and a client whose idle connections close when the
// test ends.
func tenant(t *testing.T, p *platformtest.Platform, req adminwire.CreateKeyRequest) (string, *http.Client) {
	t.Helper()
	req.TeamID, req.Name = p.Team("t", 1_000_000_000), "k"
	key := p.Key(req)
	client := loadgen.NewClient()
	t.Cleanup(client.CloseIdleConnections)
	return key, client
}
