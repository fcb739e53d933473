package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ClosedTarget is a target of a closed-loop run. Worker w sends with
// Keys[w % len(Keys)] when Keys are given, with Target.Key otherwise.
type ClosedTarget struct {
	Target
	Keys []string
}

// ClosedLoopConfig is a closed-loop throughput run: Workers clients per
// target each send a 1-token, non-streamed completion, wait for the answer
// and send the next. The run visits the targets in turn, Rounds times, for
// Duration/Rounds each: the machine's speed drifts over a run, and rounds
// spread each target over the whole of it, so that targets compare under
// the same conditions.
type ClosedLoopConfig struct {
	Targets  []ClosedTarget
	Workers  int
	Duration time.Duration
	Rounds   int
	// Client sends the requests; nil means NewClient.
	Client *http.Client `json:"-"`
}

// ClosedLoopResult is what one target of a closed-loop run answered.
type ClosedLoopResult struct {
	Name string
	// Answered counts 200 answers read to their end, Failed the others
	// (errors and other statuses); FirstFailure says what the first was.
	Answered, Failed int64
	FirstFailure     string
}

// PerSecond is the target's answers a second over d, the time it was
// sent to.
func (r ClosedLoopResult) PerSecond(d time.Duration) float64 {
	return float64(r.Answered) / d.Seconds()
}

// ClosedLoop runs cfg and returns one result per target, in cfg's order.
func ClosedLoop(ctx context.Context, cfg ClosedLoopConfig) []ClosedLoopResult {
	client := cfg.Client
	if client == nil {
		client = NewClient()
		defer client.CloseIdleConnections()
	}
	rounds := max(cfg.Rounds, 1)
	out := make([]ClosedLoopResult, len(cfg.Targets))
	for range rounds {
		for i, t := range cfg.Targets {
			r := closedLoop(ctx, client, t, cfg.Workers, cfg.Duration/time.Duration(rounds))
			out[i].Name = t.Name
			out[i].Answered += r.Answered
			out[i].Failed += r.Failed
			if out[i].FirstFailure == "" {
				out[i].FirstFailure = r.FirstFailure
			}
		}
	}
	return out
}

// closedLoop sends to t from workers clients until d passes.
func closedLoop(ctx context.Context, client *http.Client, t ClosedTarget, workers int, d time.Duration) ClosedLoopResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	body := fmt.Appendf(nil, `{"model":%q,"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, t.Model)
	var ok, failed atomic.Int64
	var first atomic.Value
	fail := func(what string) {
		failed.Add(1)
		first.CompareAndSwap(nil, what)
	}
	var wg sync.WaitGroup
	for w := range workers {
		key := t.Key
		if len(t.Keys) > 0 {
			key = t.Keys[w%len(t.Keys)]
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL+"/v1/chat/completions", bytes.NewReader(body))
				if err != nil {
					fail(err.Error())
					return
				}
				req.Header.Set("Content-Type", "application/json")
				if key != "" {
					req.Header.Set("Authorization", "Bearer "+key)
				}
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						fail(err.Error())
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					fail(resp.Status)
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	f, _ := first.Load().(string)
	return ClosedLoopResult{Name: t.Name, Answered: ok.Load(), Failed: failed.Load(), FirstFailure: f}
}
