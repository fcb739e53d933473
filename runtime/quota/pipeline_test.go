package quota

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// waitPending waits until n callers queue behind the pipeline held out.
func waitPending(t *testing.T, p *pipeliner, n int) {
	t.Helper()
	testenv.EventuallyNil(t, testenv.WaitFor, fmt.Sprintf("%d callers queued", n), func() error {
		p.mu.Lock()
		got := len(p.pending)
		p.mu.Unlock()
		if got != n {
			return fmt.Errorf("%d queued", got)
		}
		return nil
	})
}

// release ends the pipeline the test held out, as send does: the first
// caller queued leads the next.
func release(p *pipeliner) {
	p.mu.Lock()
	next := p.pending[0]
	next.lead = true
	p.mu.Unlock()
	close(next.done)
}

// TestPipelineCarriesConcurrentCalls: calls that arrive while a pipeline
// is out go together in the next one, and each gets its own answer.
func TestPipelineCarriesConcurrentCalls(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix})
	ctx := context.Background()
	const n = 20
	lim := KeyLimits{MaxStreams: n / 2, RPM: 1000}
	l.pipe.mu.Lock()
	l.pipe.out = true // a pipeline is out: every call queues
	l.pipe.mu.Unlock()
	got := make([]AdmitDecision, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = l.Admit(ctx, "k_pipe", fmt.Sprintf("r%d", i), lim)
		}()
	}
	waitPending(t, l.pipe, n)
	release(l.pipe)
	wg.Wait()
	if p, c := l.pipe.pipelines.Load(), l.pipe.calls.Load(); p != 1 || c != n {
		t.Errorf("%d pipelines carried %d calls, want 1 carrying %d", p, c, n)
	}
	allowed := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if got[i].Allowed {
			allowed++
		} else if got[i].Refused != LimitStreams {
			t.Errorf("call %d refused by %q, want streams", i, got[i].Refused)
		}
	}
	if allowed != n/2 {
		t.Errorf("%d admitted, want the %d slots", allowed, n/2)
	}
	if held := rdb.ZCard(ctx, l.Keys().Streams("k_pipe")).Val(); held != n/2 {
		t.Errorf("%d slots held, want %d", held, n/2)
	}
	// Alone, a call goes out at once.
	if _, err := l.Finish(ctx, Finish{KeyID: "k_pipe", RequestID: "r0", Release: true}); err != nil {
		t.Fatal(err)
	}
	if p := l.pipe.pipelines.Load(); p != 2 {
		t.Errorf("%d pipelines after a lone call, want 2", p)
	}
}

// TestPipelineCallerThatGivesUpSendsNothing: a caller whose context ends
// while it waits for a pipeline leaves the queue, and Redis never sees its
// call; the others go on.
func TestPipelineCallerThatGivesUpSendsNothing(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix})
	ctx := context.Background()
	lim := KeyLimits{RPM: 100}
	l.pipe.mu.Lock()
	l.pipe.out = true
	l.pipe.mu.Unlock()
	done := make(chan error, 1)
	go func() { // queued first: it will lead
		_, err := l.Admit(ctx, "k_stay", "r_stay", lim)
		done <- err
	}()
	waitPending(t, l.pipe, 1)
	gctx, cancel := context.WithCancel(ctx)
	gave := make(chan error, 1)
	go func() {
		_, err := l.Admit(gctx, "k_gone", "r_gone", lim)
		gave <- err
	}()
	waitPending(t, l.pipe, 2)
	cancel()
	if err := <-gave; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up got %v, want context.Canceled", err)
	}
	waitPending(t, l.pipe, 1)
	release(l.pipe)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := rdb.ZCard(ctx, l.Keys().RPM("k_gone")).Val(); n != 0 {
		t.Errorf("the call that gave up was counted %d times, want 0", n)
	}
	if n := rdb.ZCard(ctx, l.Keys().RPM("k_stay")).Val(); n != 1 {
		t.Errorf("the other call was counted %d times, want 1", n)
	}
}

// TestPipelineOutlivesItsSendersContext: a pipeline is not cancelled with
// the context of the caller that sends it, since it carries other
// callers' calls.
func TestPipelineOutlivesItsSendersContext(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	l := newLimiter(t, rdb, Config{Prefix: env.Prefix})
	lim := KeyLimits{RPM: 100}
	l.pipe.mu.Lock()
	l.pipe.out = true
	l.pipe.mu.Unlock()
	lctx, cancel := context.WithCancel(context.Background())
	leader := make(chan error, 1)
	go func() {
		_, err := l.Admit(lctx, "k_lead", "r_lead", lim)
		leader <- err
	}()
	waitPending(t, l.pipe, 1)
	other := make(chan error, 1)
	go func() {
		_, err := l.Admit(context.Background(), "k_other", "r_other", lim)
		other <- err
	}()
	waitPending(t, l.pipe, 2)
	release(l.pipe) // the first caller now leads...
	cancel()        // ...and its client leaves: it still sends, and sees it through
	if err := <-leader; err != nil {
		t.Errorf("leader: %v", err)
	}
	if err := <-other; err != nil {
		t.Errorf("other: %v", err)
	}
	ctx := context.Background()
	if n := rdb.ZCard(ctx, l.Keys().RPM("k_other")).Val(); n != 1 {
		t.Errorf("the other call was counted %d times, want 1", n)
	}
}

// TestPipelineEndsByItsEarliestDeadline: against a Redis that never
// answers, a pipeline ends by the earliest deadline of its callers, so no
// caller waits past its own timeout because it shares a pipeline.
func TestPipelineEndsByItsEarliestDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	accepting := make(chan struct{})
	go func() { // a frozen Redis: reads the commands, answers nothing
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				_, _ = io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	// No timeouts of the client's own: the pipeline's deadline is the only bound.
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ContextTimeoutEnabled: true, MaxRetries: -1,
		ReadTimeout: -1, WriteTimeout: -1})
	t.Cleanup(func() {
		rdb.Close()
		ln.Close()
		<-accepting // no conns.Add after this: Wait may begin
		conns.Wait()
	})
	l := newLimiter(t, rdb, Config{})
	lim := KeyLimits{RPM: 100}
	l.pipe.mu.Lock()
	l.pipe.out = true
	l.pipe.mu.Unlock()
	const long, short = time.Minute, 200 * time.Millisecond
	lctx, cancelLong := context.WithTimeout(context.Background(), long)
	defer cancelLong()
	type result struct {
		err  error
		took time.Duration
	}
	leader, other := make(chan result, 1), make(chan result, 1)
	go func() { // queued first: it sends the pipeline
		start := time.Now()
		_, err := l.Admit(lctx, "k_long", "r_long", lim)
		leader <- result{err, time.Since(start)}
	}()
	waitPending(t, l.pipe, 1)
	sctx, cancelShort := context.WithTimeout(context.Background(), short)
	defer cancelShort()
	go func() {
		start := time.Now()
		_, err := l.Admit(sctx, "k_short", "r_short", lim)
		other <- result{err, time.Since(start)}
	}()
	waitPending(t, l.pipe, 2)
	release(l.pipe)
	for name, ch := range map[string]chan result{"the short caller": other, "the long caller": leader} {
		r := <-ch
		if r.err == nil {
			t.Errorf("%s: Admit answered by a Redis that answers nothing", name)
		}
		if r.took >= long/2 {
			t.Errorf("%s waited %v: the pipeline outlived the earliest deadline (%v)", name, r.took, short)
		}
	}
}
