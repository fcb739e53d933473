package twin

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// caller streams chat completions to one model, one after another, as an
// SDK would, until stopped; each request is recorded on r.tl as well.
type caller struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	reqs []Request
}

// callerOptions shape a caller's requests.
type callerOptions struct {
	// Prompt is every request's prompt; "" asks "Still there? (n)", n
	// the request's number.
	Prompt string
	// MaxTokens is each request's max_tokens.
	MaxTokens int
	// Pause is the real-world pause between two requests (0: the next is
	// sent as soon as one ends); Delay the real-world wait before the
	// first.
	Pause, Delay time.Duration
	// MaxRetries is the SDK's: sdkMaxRetries as the SDKs' default, 0 for
	// no retries, so that every failure shows.
	MaxRetries int
}

// callerPause is a trickle caller's pause between two requests
// (real-world): a steady trickle, not a load that would scale the model.
const callerPause = 5 * time.Second

// callerTokens is a trickle caller's answer length: a stream that runs
// across a few of the sim's token steps, so a cut one shows.
const callerTokens = 32

// trickle is a caller that watches a model's service: short answers at a
// steady pace, on the SDKs' default retries.
var trickle = callerOptions{MaxTokens: callerTokens, Pause: callerPause, MaxRetries: sdkMaxRetries}

// streamTo starts a caller of model.
func (r *twinRun) streamTo(ctx context.Context, model string, o callerOptions) *caller {
	c := &caller{stop: make(chan struct{}), done: make(chan struct{})}
	sdk := r.c.NewSDK(r.p.URL, r.key)
	sdk.MaxRetries = o.MaxRetries
	wait := func(d time.Duration) bool {
		select {
		case <-c.stop:
			return false
		case <-ctx.Done():
			return false
		case <-time.After(r.c.Dur(d)):
			return true
		}
	}
	go func() {
		defer close(c.done)
		if !wait(o.Delay) {
			return
		}
		for i := 0; ; i++ {
			prompt := o.Prompt
			if prompt == "" {
				prompt = fmt.Sprintf("Still there? (%d)", i)
			}
			req := sdk.StreamChat(ctx, r.tl, model, prompt, o.MaxTokens)
			c.mu.Lock()
			c.reqs = append(c.reqs, req)
			c.mu.Unlock()
			if !wait(o.Pause) {
				return
			}
		}
	}()
	return c
}

// callerArrivals spreads the first requests of a set of callers (real
// world): clients do not all arrive in the same millisecond, and a burst
// of prompts would show on the pending gauge as a demand that is not
// there.
const callerArrivals = 30 * time.Second

// streamsTo starts n callers of model, their first requests spread over
// callerArrivals.
func (r *twinRun) streamsTo(ctx context.Context, model string, n int, o callerOptions) []*caller {
	var cs []*caller
	for i := range n {
		o.Delay = callerArrivals * time.Duration(i) / time.Duration(n)
		cs = append(cs, r.streamTo(ctx, model, o))
	}
	return cs
}

// requests returns the caller's requests that have ended so far.
func (c *caller) requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reqs)
}

// end stops the caller after its request in flight and returns its
// requests.
func (c *caller) end() []Request {
	close(c.stop)
	<-c.done
	return c.requests()
}

// endAll ends every caller of cs and returns their requests.
func endAll(cs []*caller) []Request {
	var reqs []Request
	for _, c := range cs {
		close(c.stop)
	}
	for _, c := range cs {
		<-c.done
		reqs = append(reqs, c.requests()...)
	}
	return reqs
}
