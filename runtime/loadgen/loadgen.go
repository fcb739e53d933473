package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/hoptrace"
	"github.com/llmplat/llmplat/runtime/openai"
)

// Target is one way to reach the engine.
type Target struct {
	// Name labels the target's results ("direct", "proxy", "platform").
	Name string
	// URL is the base URL without /v1.
	URL string
	// Key is the bearer token, if the target needs one.
	Key string
	// Model is the model name the target answers to.
	Model string
}

// Config is one run.
type Config struct {
	// Targets share the arrivals in turn; at least one.
	Targets []Target
	// Rate is the arrivals per second over all targets.
	Rate float64
	// Duration is how long arrivals go on; the run then waits for every
	// started request to end.
	Duration time.Duration
	// Prompt is each request's user message, after the request's id
	// ("req-<target>-<n>: "), by which a test can find the request at the
	// engine; MaxTokens caps its answer.
	Prompt    string
	MaxTokens int
	// Seed fixes the arrival schedule.
	Seed uint64
	// Client sends the requests; nil means a client whose transport keeps
	// enough idle connections for a thousand streams.
	Client *http.Client `json:"-"`
}

// Result is what one target measured.
type Result struct {
	Name string
	// Requests is how many were sent; Errors how many did not end in a
	// complete stream (a non-200, an error event, no [DONE]).
	Requests, Errors int
	// FirstError describes the first failure, for the report.
	FirstError string
	// TTFT has one sample per request that streamed content; ITL one per
	// gap between two content chunks.
	TTFT, ITL []time.Duration
	// FirstToken maps each request id that streamed content to its TTFT.
	FirstToken map[string]time.Duration
	// Tokens is the completion tokens of the usage chunks; Chunks the
	// content chunks that carried them (an engine that falls behind sends
	// several tokens in one chunk).
	Tokens, Chunks int64
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of ds, nearest rank; zero
// when ds is empty. It sorts ds.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// NewClient returns a client fit for many concurrent streams on loopback.
func NewClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = 2048
	return &http.Client{Transport: tr}
}

// Run sends the arrivals and returns one Result per target, in the order
// of cfg.Targets. Ending ctx stops new arrivals and aborts the requests in
// flight; Run returns once every request it started has ended.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if len(cfg.Targets) == 0 || cfg.Rate <= 0 || cfg.Duration <= 0 || cfg.MaxTokens <= 0 {
		return nil, errors.New("loadgen: need targets, a positive rate, duration and max tokens")
	}
	if cfg.Client == nil {
		cfg.Client = NewClient()
	}
	results := make([]Result, len(cfg.Targets))
	for i, t := range cfg.Targets {
		results[i].Name = t.Name
		results[i].FirstToken = map[string]time.Duration{}
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	poisson(ctx, rng, cfg.Rate, time.Now(), cfg.Duration, func(n int) {
		i := n % len(cfg.Targets)
		t := cfg.Targets[i]
		id := fmt.Sprintf("req-%s-%d", t.Name, n)
		body := requestBody(t, id+": "+cfg.Prompt, cfg.MaxTokens, true, false)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stream(ctx, cfg.Client, t, body)
			mu.Lock()
			defer mu.Unlock()
			r := &results[i]
			r.Requests++
			if s.err != nil {
				r.Errors++
				if r.FirstError == "" {
					r.FirstError = s.err.Error()
				}
			}
			if s.ttft > 0 {
				r.TTFT = append(r.TTFT, s.ttft)
				r.FirstToken[id] = s.ttft
			}
			r.ITL = append(r.ITL, s.itl...)
			r.Tokens += s.tokens
			r.Chunks += s.chunks
		}()
	})
	wg.Wait()
	return results, ctx.Err()
}

// poisson calls send(n) at each arrival of a Poisson process of rate a
// second, from start until d has passed or ctx ends.
func poisson(ctx context.Context, rng *rand.Rand, rate float64, start time.Time, d time.Duration, send func(n int)) {
	next := start
	for n := 0; ; n++ {
		next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if next.Sub(start) >= d {
			return
		}
		if wait := time.Until(next); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		send(n)
	}
}

// drain reads what follows [DONE] to the response's end, as the OpenAI
// Python SDK does, so the connection goes back to the client's pool: a
// client that closes the body at [DONE] drops a connection whose end has
// not arrived yet, and the next request to that server pays a new one.
// A server that sends more than a little, or keeps the response open past
// drainWait, has its connection dropped: cancel ends the request.
func drain(body io.Reader, cancel context.CancelFunc) {
	stop := time.AfterFunc(drainWait, cancel)
	defer stop.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
}

// drainWait bounds the wait for a response's end after its [DONE].
const drainWait = time.Second

// sample is one request's measurements.
type sample struct {
	// sent is when the request was sent, first when its first content
	// chunk came (zero when none did).
	sent, first time.Time
	ttft        time.Duration
	itl         []time.Duration
	tokens      int64
	chunks      int64
	err         error
}

// stream sends one request and reads its answer to the end.
func stream(ctx context.Context, client *http.Client, t Target, body []byte) sample {
	var s sample
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sent := time.Now()
	s.sent = sent
	if hoptrace.On {
		hoptrace.MarkAt(hoptrace.Key(body), hoptrace.ClientSent, sent)
	}
	resp, err := post(ctx, client, t, body)
	if err != nil {
		s.err = err
		return s
	}
	defer resp.Body.Close()
	sse := openai.NewSSEReader(resp.Body)
	var last time.Time
	for {
		data, err := sse.Next()
		if err != nil {
			s.err = fmt.Errorf("%s: stream ended without [DONE]: %w", t.Name, err)
			return s
		}
		if openai.IsDone(data) {
			drain(resp.Body, cancel)
			return s
		}
		ev := engineclient.ParseEvent(data)
		switch {
		case ev.Err != nil:
			s.err = fmt.Errorf("%s: error event: %s", t.Name, ev.Err.Message)
		case ev.Usage != nil:
			s.tokens = ev.Usage.CompletionTokens
		case ev.Tokens > 0:
			now := time.Now()
			s.chunks++
			if last.IsZero() {
				s.ttft, s.first = now.Sub(sent), now
				if hoptrace.On {
					hoptrace.MarkAt(hoptrace.Key(body), hoptrace.ClientFirst, now)
				}
			} else {
				s.itl = append(s.itl, now.Sub(last))
			}
			last = now
		}
	}
}

// Held is a set of streams held open by Hold.
type Held struct {
	// Opened is how many streams reached their first content chunk;
	// Errors how many failed before it, FirstError the first failure.
	Opened, Errors int
	FirstError     string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Hold opens n streams to t, at most 64 starting at once, and returns when
// each has streamed its first content chunk or failed. The streams stay
// open, read as they come, until Close.
func Hold(ctx context.Context, client *http.Client, t Target, n int, prompt string, maxTokens int) *Held {
	ctx, cancel := context.WithCancel(ctx)
	h := &Held{cancel: cancel}
	var (
		mu    sync.Mutex
		ready sync.WaitGroup
	)
	starting := make(chan struct{}, 64)
	for i := range n {
		body := requestBody(t, fmt.Sprintf("hold-%d: %s", i, prompt), maxTokens, false, false)
		ready.Add(1)
		h.wg.Add(1)
		starting <- struct{}{}
		go func() {
			defer h.wg.Done()
			once := sync.OnceFunc(func() { <-starting; ready.Done() })
			defer once()
			err := holdOne(ctx, client, t, body, func() {
				mu.Lock()
				h.Opened++
				mu.Unlock()
				once()
			})
			if err != nil && ctx.Err() == nil {
				mu.Lock()
				h.Errors++
				if h.FirstError == "" {
					h.FirstError = err.Error()
				}
				mu.Unlock()
			}
		}()
	}
	ready.Wait()
	return h
}

// Close ends every held stream and waits for their readers.
func (h *Held) Close() {
	h.cancel()
	h.wg.Wait()
}

// holdOne streams one request, calling opened at its first content chunk,
// and reads on until the stream or ctx ends.
func holdOne(ctx context.Context, client *http.Client, t Target, body []byte, opened func()) error {
	resp, err := post(ctx, client, t, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sse := openai.NewSSEReader(resp.Body)
	first := true
	for {
		data, err := sse.Next()
		if err != nil {
			if first {
				return fmt.Errorf("%s: stream ended before its first token: %w", t.Name, err)
			}
			return nil
		}
		if ev := engineclient.ParseEvent(data); first && ev.Tokens > 0 {
			first = false
			opened()
		} else if ev.Err != nil && first {
			return fmt.Errorf("%s: error event: %s", t.Name, ev.Err.Message)
		}
	}
}

// StatusError is an answer other than 200: its status, its Retry-After
// header and the start of its body.
type StatusError struct {
	// Target names the target that answered.
	Target     string
	Status     int
	RetryAfter string
	Body       []byte
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: status %d: %s", e.Target, e.Status, bytes.TrimSpace(e.Body))
}

// maxErrorBody bounds how much of a refusal's body is kept.
const maxErrorBody = 4 << 10

// post sends one chat completion request to t and returns the answer when
// it is a 200; any other answer is a *StatusError.
func post(ctx context.Context, client *http.Client, t Target, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if t.Key != "" {
		req.Header.Set("Authorization", "Bearer "+t.Key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, &StatusError{Target: t.Name, Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), Body: msg}
	}
	return resp, nil
}

// requestBody is a streamed chat completion request of one user message,
// asking for the usage chunk when usage is set, and for an answer that
// runs to maxTokens when ignoreEOS is.
func requestBody(t Target, message string, maxTokens int, usage, ignoreEOS bool) []byte {
	r := map[string]any{"model": t.Model, "stream": true, "max_tokens": maxTokens,
		"messages": []openai.Message{openai.TextMessage("user", message)}}
	if usage {
		r["stream_options"] = map[string]bool{"include_usage": true}
	}
	if ignoreEOS {
		r["ignore_eos"] = true
	}
	b, _ := json.Marshal(r) // plain values always encode
	return b
}
