package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Weighted is a model of the mix and its share of the requests.
type Weighted struct {
	Model  string
	Weight float64
}

// Plan is a load test against any OpenAI-compatible endpoint: llmplat
// loadtest.
type Plan struct {
	// BaseURL is the API's base URL without /v1; Key its bearer token.
	BaseURL, Key string
	// Models is the mix: each request draws its model by weight.
	Models []Weighted
	// Rate is the arrivals per second (Poisson), for Duration. Burst,
	// instead, sends that many requests at once.
	Rate     float64
	Duration time.Duration
	Burst    int
	// Concurrency caps the requests in flight; 0 is no cap. An arrival
	// that finds the cap reached waits for a place.
	Concurrency int
	// Ramp, with a cap, raises it evenly from 1 to Concurrency over Ramp
	// from the start: a load that climbs to its peak, as a day's traffic
	// does, rather than arriving at once. With a high rate the test is a
	// closed loop whose streams rise to Concurrency.
	Ramp time.Duration
	// PromptTokens is each prompt's length, about (words of filler);
	// MaxTokens each answer's cap.
	PromptTokens, MaxTokens int
	// IgnoreEOS asks for answers that run to MaxTokens (vLLM's ignore_eos,
	// as its benchmarks send): long streams of a known length.
	IgnoreEOS bool
	// Seed seeds the random choice of each request's model by weight: the
	// same value, the same sequence of models.
	Seed uint64
	// Progress, when set, is called about once a second, and once at the
	// end, from one goroutine at a time.
	Progress func(Progress)
	// OnDone, when set, is called as each request ends, from that
	// request's goroutine.
	OnDone func(Finished)
	// Stop, when closed, ends the arrivals early, as the end of Duration
	// does: the requests in flight finish.
	Stop <-chan struct{}
	// Client sends the requests; nil means NewClient().
	Client *http.Client
}

// Progress is a load test's state while it runs.
type Progress struct {
	Elapsed                    time.Duration
	Sent, InFlight, Done, Errs int
	// TTFT50 is the median time to first token so far.
	TTFT50 time.Duration
}

// Finished is one request of a load test as its client saw it.
type Finished struct {
	Model string
	// Sent is when the request was sent, FirstToken when its first
	// content chunk came (zero when none did), Ended when it ended.
	Sent, FirstToken, Ended time.Time
	// Err is why the request did not end in a complete stream, nil when
	// it did; an answer other than 200 is a *StatusError.
	Err error
}

// Summary is what a group of requests (one model, or all) measured.
type Summary struct {
	Requests int `json:"requests"`
	OK       int `json:"ok"`
	// Errors counts the failures by kind: an HTTP status ("429"), an
	// error event in the stream ("stream error"), a stream cut short
	// ("incomplete"), a failed connection ("transport").
	Errors map[string]int `json:"errors"`
	// TTFT and ITL are percentiles (p50, p90, p99) in milliseconds.
	TTFT             Percentiles `json:"ttft_ms"`
	ITL              Percentiles `json:"itl_ms"`
	CompletionTokens int64       `json:"completion_tokens"`
	// TokensPerSecond is the completion tokens over the test's wall time.
	TokensPerSecond float64 `json:"tokens_per_second"`

	ttft, itl []time.Duration
}

// Percentiles of a latency, in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// Report is a load test's result.
type Report struct {
	Wall    time.Duration       `json:"-"`
	WallS   float64             `json:"wall_seconds"`
	Overall *Summary            `json:"overall"`
	Models  map[string]*Summary `json:"models"`
}

// errorKind names a failed request's kind for Summary.Errors.
func errorKind(err error) string {
	msg := err.Error()
	var status *StatusError
	switch {
	case errors.As(err, &status):
		return strconv.Itoa(status.Status)
	case strings.Contains(msg, "error event"):
		return "stream error"
	case strings.Contains(msg, "without [DONE]"):
		return "incomplete"
	}
	return "transport"
}

// Load runs p and returns what it measured. Ending ctx stops arrivals and
// aborts what is in flight.
func Load(ctx context.Context, p Plan) (Report, error) {
	if p.BaseURL == "" || len(p.Models) == 0 || p.MaxTokens <= 0 {
		return Report{}, errors.New("loadgen: need a base URL, at least one model and a positive answer length")
	}
	if (p.Rate > 0) == (p.Burst > 0) {
		return Report{}, errors.New("loadgen: give a rate (with a duration) or a burst, not both")
	}
	if p.Rate > 0 && p.Duration <= 0 {
		return Report{}, errors.New("loadgen: a rate needs a positive duration")
	}
	if p.Ramp < 0 || (p.Ramp > 0 && p.Concurrency <= 0) {
		return Report{}, errors.New("loadgen: a ramp needs a cap on concurrency to rise to")
	}
	var total float64
	for _, m := range p.Models {
		if m.Model == "" || m.Weight <= 0 {
			return Report{}, fmt.Errorf("loadgen: model %q: a name and a positive weight", m.Model)
		}
		total += m.Weight
	}
	if p.Client == nil {
		p.Client = NewClient()
	}
	rep := Report{Overall: &Summary{Errors: map[string]int{}}, Models: map[string]*Summary{}}
	for _, m := range p.Models {
		rep.Models[m.Model] = &Summary{Errors: map[string]int{}}
	}
	rng := rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))
	pick := func() string {
		x := rng.Float64() * total
		for _, m := range p.Models {
			if x -= m.Weight; x < 0 {
				return m.Model
			}
		}
		return p.Models[len(p.Models)-1].Model
	}
	prompt := strings.TrimSpace(strings.Repeat("load ", max(1, p.PromptTokens)))
	var slots chan struct{}
	if p.Concurrency > 0 {
		slots = make(chan struct{}, p.Concurrency)
	}
	start := time.Now()
	stopRamp := ramp(slots, p.Ramp)
	defer stopRamp()
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		sent     int
		inFlight int
		allTTFT  []time.Duration
	)
	report := func() {
		if p.Progress == nil {
			return
		}
		mu.Lock()
		pr := Progress{Elapsed: time.Since(start), Sent: sent, InFlight: inFlight, Done: rep.Overall.Requests,
			Errs: rep.Overall.Requests - rep.Overall.OK, TTFT50: Quantile(slices.Clone(allTTFT), 0.5)}
		mu.Unlock()
		p.Progress(pr)
	}
	progressDone := make(chan struct{})
	progressStopped := make(chan struct{})
	go func() {
		defer close(progressStopped)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-progressDone:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				report()
			}
		}
	}()
	// Arrivals stop when the duration has passed, also when a cap on
	// concurrency held them back: a closed loop (a high rate under a cap)
	// lasts the duration, not until its schedule is used up. Stop ends
	// them early.
	arrivals, stopArrivals := context.WithCancel(ctx)
	if p.Rate > 0 {
		var cancel context.CancelFunc
		arrivals, cancel = context.WithDeadline(arrivals, start.Add(p.Duration))
		defer cancel()
	}
	var stopper sync.WaitGroup
	defer stopper.Wait()
	defer stopArrivals()
	if p.Stop != nil {
		stopper.Go(func() {
			select {
			case <-p.Stop:
				stopArrivals()
			case <-arrivals.Done():
			}
		})
	}
	send := func(n int) {
		model := pick()
		t := Target{Name: model, URL: strings.TrimSuffix(strings.TrimSuffix(p.BaseURL, "/"), "/v1"), Key: p.Key, Model: model}
		body := requestBody(t, fmt.Sprintf("req-%d: %s", n, prompt), p.MaxTokens, true, p.IgnoreEOS)
		if slots != nil {
			select {
			case slots <- struct{}{}:
			case <-arrivals.Done():
				return
			}
		}
		mu.Lock()
		sent++
		inFlight++
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stream(ctx, p.Client, t, body)
			ended := time.Now()
			if slots != nil {
				<-slots
			}
			if p.OnDone != nil {
				p.OnDone(Finished{Model: model, Sent: s.sent, FirstToken: s.first, Ended: ended, Err: s.err})
			}
			mu.Lock()
			defer mu.Unlock()
			inFlight--
			for _, sum := range []*Summary{rep.Overall, rep.Models[model]} {
				sum.Requests++
				if s.err != nil {
					sum.Errors[errorKind(s.err)]++
				} else {
					sum.OK++
				}
				if s.ttft > 0 {
					sum.ttft = append(sum.ttft, s.ttft)
				}
				sum.itl = append(sum.itl, s.itl...)
				sum.CompletionTokens += s.tokens
			}
			if s.ttft > 0 {
				allTTFT = append(allTTFT, s.ttft)
			}
		}()
	}
	if p.Burst > 0 {
		for n := range p.Burst {
			if arrivals.Err() != nil {
				break
			}
			send(n)
		}
	} else {
		poisson(arrivals, rng, p.Rate, start, p.Duration, send)
	}
	wg.Wait()
	close(progressDone)
	<-progressStopped
	report()
	rep.Wall = time.Since(start)
	rep.WallS = rep.Wall.Seconds()
	for _, sum := range append([]*Summary{rep.Overall}, values(rep.Models)...) {
		sum.TTFT, sum.ITL = percentiles(sum.ttft), percentiles(sum.itl)
		if rep.Wall > 0 {
			sum.TokensPerSecond = float64(sum.CompletionTokens) / rep.Wall.Seconds()
		}
	}
	return rep, ctx.Err()
}

// ramp holds back all but one of the places in slots and gives them back
// evenly over d; stop ends it early. Places are interchangeable: a taken
// one is a request in flight or one still held back, so the ramp's
// receive always finds one while it holds any back.
func ramp(slots chan struct{}, d time.Duration) (stop func()) {
	held := cap(slots) - 1
	if d <= 0 || held <= 0 {
		return func() {}
	}
	for range held {
		slots <- struct{}{}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d / time.Duration(held))
		defer t.Stop()
		for range held {
			select {
			case <-done:
				return
			case <-t.C:
				<-slots
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func percentiles(ds []time.Duration) Percentiles {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return Percentiles{P50: ms(Quantile(ds, 0.5)), P90: ms(Quantile(ds, 0.9)), P99: ms(Quantile(ds, 0.99))}
}

func values(m map[string]*Summary) []*Summary {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*Summary, 0, len(m))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

// ParseMix reads a model mix: "llama-8b:8,qwen-32b:1.5,llama-70b:0.5", or
// one model without a weight.
func ParseMix(s string) ([]Weighted, error) {
	var out []Weighted
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, weight, found := strings.Cut(part, ":")
		w := 1.0
		if found {
			var err error
			if w, err = strconv.ParseFloat(weight, 64); err != nil || w <= 0 {
				return nil, fmt.Errorf("model mix %q: weight of %s must be a positive number", s, name)
			}
		}
		out = append(out, Weighted{Model: name, Weight: w})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("model mix %q: no model", s)
	}
	return out, nil
}
