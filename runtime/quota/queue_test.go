package quota

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// slowPoll is a poll interval long enough that a test passing within it
// proves a wake-up, not a poll, moved the waiter.
const slowPoll = 5 * time.Second

// queueEnv is two gateway replicas' queues on one Redis.
type queueEnv struct {
	rdb  *redis.Client
	a, b *Queue
	keys Keys
}

func newQueueEnv(t *testing.T, poll time.Duration) queueEnv {
	t.Helper()
	env := testenv.Redis(t)
	cfg := Config{Prefix: env.Prefix, QueuePollInterval: poll}
	return queueEnv{
		rdb:  env.Client(),
		a:    newQueue(t, env.Client(), cfg),
		b:    newQueue(t, env.Client(), cfg),
		keys: NewKeys(env.Prefix),
	}
}

// card is the raw size of model's queue, without purging anything.
func (e queueEnv) card(t *testing.T, model string) int64 {
	t.Helper()
	n, err := e.rdb.ZCard(context.Background(), e.keys.Queue(model)).Result()
	if err != nil {
		t.Fatalf("ZCARD: %v", err)
	}
	return n
}

// waitDepth waits until model's queue holds want entries.
func (e queueEnv) waitDepth(t *testing.T, model string, want int64) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("queue depth %d", want), func() bool {
		n, err := e.a.Depth(context.Background(), model)
		return err == nil && n == want
	})
}

// waitingHead queues req_w on replica a for model and returns once its
// first try found no room and it waits at the head again; its next try
// finds room. It returns the number of tries and where Wait's result comes.
func (e queueEnv) waitingHead(t *testing.T, model string) (*atomic.Int64, chan error) {
	t.Helper()
	var tries atomic.Int64
	var open atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- e.a.Wait(context.Background(), model, "req_w", 10*time.Second, func(context.Context) (bool, error) {
			tries.Add(1)
			return open.Load(), nil
		})
	}()
	testenv.Eventually(t, "the first try", func() bool { return tries.Load() == 1 })
	e.waitDepth(t, model, 1) // back in the queue after the failed try
	open.Store(true)
	return &tries, done
}

// never is a try that finds no capacity.
func never(context.Context) (bool, error) { return false, nil }

func TestQueueServesInArrivalOrderAcrossReplicas(t *testing.T) {
	const waiters = 6
	e := newQueueEnv(t, slowPoll)
	ctx := context.Background()
	capacity := make(chan struct{}, waiters)
	var mu sync.Mutex
	var served []int
	errs := make(chan error, waiters)
	for i := range waiters {
		q := []*Queue{e.a, e.b}[i%2]
		go func() {
			errs <- q.Wait(ctx, "m", fmt.Sprintf("req_%d", i), 10*time.Second, func(context.Context) (bool, error) {
				select {
				case <-capacity:
					mu.Lock()
					served = append(served, i)
					mu.Unlock()
					return true, nil
				default:
					return false, nil
				}
			})
		}()
		e.waitDepth(t, "m", int64(i+1)) // arrival order is the order of starts
	}
	for _, batch := range []int{3, 3} {
		for range batch {
			capacity <- struct{}{}
		}
		if err := e.b.Notify(ctx, "m"); err != nil {
			t.Fatal(err)
		}
		for range batch {
			if err := <-errs; err != nil {
				t.Fatalf("Wait: %v", err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(served) != "[0 1 2 3 4 5]" {
		t.Errorf("served %v, want [0 1 2 3 4 5]", served)
	}
	if n := e.card(t, "m"); n != 0 {
		t.Errorf("queue holds %d entries after all were served", n)
	}
}

func TestQueueTimesOut(t *testing.T) {
	const limit = 300 * time.Millisecond
	e := newQueueEnv(t, 50*time.Millisecond)
	start := time.Now()
	err := e.a.Wait(context.Background(), "m", "req_late", limit, never)
	took := time.Since(start)
	if !errors.Is(err, ErrQueueTimeout) {
		t.Fatalf("Wait = %v, want ErrQueueTimeout", err)
	}
	if took < limit || took > limit+time.Second {
		t.Errorf("returned after %v, want about %v", took, limit)
	}
	if n := e.card(t, "m"); n != 0 {
		t.Errorf("queue holds %d entries after the timeout, want 0", n)
	}
}

func TestQueueClientLeaves(t *testing.T) {
	e := newQueueEnv(t, slowPoll)
	head := make(chan error, 1)
	headCtx, stopHead := context.WithCancel(context.Background())
	defer stopHead()
	go func() { head <- e.a.Wait(headCtx, "m", "req_head", 10*time.Second, never) }()
	e.waitDepth(t, "m", 1)

	ctx, leave := context.WithCancel(context.Background())
	behind := make(chan error, 1)
	go func() { behind <- e.b.Wait(ctx, "m", "req_behind", 10*time.Second, never) }()
	e.waitDepth(t, "m", 2)
	leave()
	select {
	case err := <-behind:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Wait did not return within 1 s of its client leaving")
	}
	if n := e.card(t, "m"); n != 1 {
		t.Errorf("queue holds %d entries right after the client left, want 1 (the head)", n)
	}
	stopHead()
	if err := <-head; !errors.Is(err, context.Canceled) {
		t.Errorf("head Wait = %v, want context.Canceled", err)
	}
	if n := e.card(t, "m"); n != 0 {
		t.Errorf("queue holds %d entries after both left, want 0", n)
	}
}

func TestQueueNotifyWakesFasterThanThePoll(t *testing.T) {
	e := newQueueEnv(t, slowPoll)
	ctx := context.Background()
	tries, done := e.waitingHead(t, "m")
	start := time.Now()
	if err := e.b.Notify(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait = %v", err)
		}
	case <-time.After(slowPoll / 2):
		t.Fatalf("Notify did not wake the waiter within %v (poll is %v)", slowPoll/2, slowPoll)
	}
	t.Logf("woken and served %v after Notify", time.Since(start))
	if got := tries.Load(); got != 2 {
		t.Errorf("tries = %d, want 2 (one on arrival, one on the wake-up)", got)
	}
}

// TestQueueWakeDuringTryIsNotLost: a wake-up that comes while the head has
// stepped out to try finds nobody in the queue; the head, coming back
// without room, tries again at once instead of sleeping a poll interval on
// the capacity that freed meanwhile.
func TestQueueWakeDuringTryIsNotLost(t *testing.T) {
	e := newQueueEnv(t, slowPoll)
	ctx := context.Background()
	var tries atomic.Int64
	inTry, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.a.Wait(ctx, "m", "req_w", 10*time.Second, func(context.Context) (bool, error) {
			if tries.Add(1) > 1 {
				return true, nil
			}
			close(inTry)
			<-release
			return false, nil
		})
	}()
	<-inTry
	if n := e.card(t, "m"); n != 0 {
		t.Fatalf("queue holds %d entries while its only waiter tries, want 0", n)
	}
	if err := e.b.Notify(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait = %v", err)
		}
	case <-time.After(slowPoll / 2):
		t.Fatalf("the wake-up during the try was lost: no second try within %v (poll is %v)", slowPoll/2, slowPoll)
	}
	if got := tries.Load(); got != 2 {
		t.Errorf("tries = %d, want 2", got)
	}
}

// TestQueueSlowTryDoesNotHoldTheQueue: the head's try waits for its first
// token; the next waiter is served meanwhile.
func TestQueueSlowTryDoesNotHoldTheQueue(t *testing.T) {
	const slow = time.Second
	e := newQueueEnv(t, slowPoll)
	ctx := context.Background()
	var open atomic.Bool
	headDone := make(chan time.Time, 1)
	go func() {
		err := e.a.Wait(ctx, "m", "req_slow", 10*time.Second, func(context.Context) (bool, error) {
			if !open.Load() {
				return false, nil
			}
			time.Sleep(slow) // admitted, waiting for the first token
			return true, nil
		})
		if err != nil {
			t.Errorf("slow Wait: %v", err)
		}
		headDone <- time.Now()
	}()
	e.waitDepth(t, "m", 1)
	nextErr := make(chan error, 1)
	go func() {
		nextErr <- e.b.Wait(ctx, "m", "req_next", 10*time.Second, func(context.Context) (bool, error) { return open.Load(), nil })
	}()
	e.waitDepth(t, "m", 2)
	open.Store(true)
	start := time.Now()
	if err := e.a.Notify(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if err := <-nextErr; err != nil {
		t.Fatalf("next Wait: %v", err)
	}
	if took := time.Since(start); took >= slow/2 {
		t.Errorf("the next waiter was served %v after Notify, want well under the head's %v try", took, slow)
	}
	if end := <-headDone; end.Sub(start) < slow {
		t.Errorf("the slow head returned after %v, before its try ended", end.Sub(start))
	}
}

// TestQueueStaleHeadDoesNotBlock: a crashed gateway's entry at the head
// stops counting at its own deadline.
func TestQueueStaleHeadDoesNotBlock(t *testing.T) {
	const crashedLimit = 400 * time.Millisecond
	e := newQueueEnv(t, slowPoll)
	ctx := context.Background()
	start := time.Now()
	if _, err := e.b.enqueue(ctx, "m", "req_crashed", crashedLimit); err != nil {
		t.Fatal(err)
	}
	var tries atomic.Int64
	err := e.a.Wait(ctx, "m", "req_live", 5*time.Second, func(context.Context) (bool, error) {
		tries.Add(1)
		return true, nil
	})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if took < crashedLimit || took > crashedLimit+time.Second {
		t.Errorf("served after %v, want just after the stale head's %v deadline", took, crashedLimit)
	}
	if n := e.card(t, "m"); n != 0 {
		t.Errorf("queue holds %d entries, want 0 (the stale one purged)", n)
	}
}

func TestQueueDepth(t *testing.T) {
	e := newQueueEnv(t, slowPoll)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 3)
	for i := range 3 {
		q := []*Queue{e.a, e.b}[i%2]
		go func() { errs <- q.Wait(ctx, "m", fmt.Sprintf("req_%d", i), 10*time.Second, never) }()
	}
	e.waitDepth(t, "m", 3)
	if _, err := e.b.enqueue(ctx, "m", "req_crashed", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n, err := e.a.Depth(ctx, "m"); err != nil || n != 4 {
		t.Errorf("Depth with a fresh crashed entry = %d, %v; want 4", n, err)
	}
	time.Sleep(150 * time.Millisecond)
	if n, err := e.a.Depth(ctx, "m"); err != nil || n != 3 {
		t.Errorf("Depth once the crashed entry (at the tail) expired = %d, %v; want 3", n, err)
	}
	if n, err := e.a.Depth(ctx, "other"); err != nil || n != 0 {
		t.Errorf("Depth of another model = %d, %v; want 0", n, err)
	}
	cancel()
	for range 3 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
	}
	if n, err := e.a.Depth(context.Background(), "m"); err != nil || n != 0 {
		t.Errorf("Depth after all left = %d, %v; want 0", n, err)
	}
}

func TestQueueTryErrors(t *testing.T) {
	e := newQueueEnv(t, slowPoll)
	boom := errors.New("engine refused")
	err := e.b.Wait(context.Background(), "m", "req_3", 10*time.Second, func(context.Context) (bool, error) { return false, boom })
	if !errors.Is(err, boom) {
		t.Errorf("Wait with a failing try = %v, want it to wrap %v", err, boom)
	}
	if n := e.card(t, "m"); n != 0 {
		t.Errorf("queue holds %d entries, want 0", n)
	}
}

// TestWaitEndsEveryGoroutine checks goroutines right after each way out of
// Wait, not only at the end of the run: the listener and the handoff end
// with the call.
func TestWaitEndsEveryGoroutine(t *testing.T) {
	e := newQueueEnv(t, 20*time.Millisecond)
	before := goleak.IgnoreCurrent()
	tests := []struct {
		name  string
		leave time.Duration // the client leaves after this long; 0: never
		try   TryFunc
		want  error
	}{
		{"served", 0, func(context.Context) (bool, error) { return true, nil }, nil},
		{"served after a slow try (handoff ran)", 0, func(context.Context) (bool, error) {
			time.Sleep(3 * queueHandoff)
			return true, nil
		}, nil},
		{"timed out", 0, never, ErrQueueTimeout},
		{"client left", 50 * time.Millisecond, never, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.leave > 0 {
				stop := time.AfterFunc(tt.leave, cancel)
				defer stop.Stop()
			}
			start := time.Now()
			err := e.a.Wait(ctx, "m", "req_g", 200*time.Millisecond, tt.try)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Wait = %v, want %v", err, tt.want)
			}
			if tt.leave > 0 && time.Since(start) < tt.leave {
				t.Fatalf("Wait returned before the client left")
			}
			if err := goleak.Find(before); err != nil {
				t.Errorf("after Wait returned: %v", err)
			}
		})
	}
}

// TestWaitersShareOneSubscriber: every waiter of a Queue, whatever its
// model, listens through one pub/sub connection, and each still gets its
// own wake-up; once nobody waits, the subscription is gone.
func TestWaitersShareOneSubscriber(t *testing.T) {
	e := newQueueEnv(t, time.Minute) // no polling: only wake-ups serve
	ctx := context.Background()
	numsub := func(model string) int64 {
		t.Helper()
		n, err := e.rdb.PubSubNumSub(ctx, e.keys.QueueWake(model)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[e.keys.QueueWake(model)]
	}
	var open atomic.Bool // capacity, as the try sees it
	var served atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		model := "m1"
		if i%6 == 0 {
			model = "m2"
		}
		wg.Go(func() {
			err := e.a.Wait(ctx, model, fmt.Sprintf("req_%d", i), 30*time.Second, func(context.Context) (bool, error) {
				return open.Load(), nil
			})
			if err != nil {
				t.Errorf("wait %d: %v", i, err)
				return
			}
			served.Add(1)
		})
	}
	e.waitDepth(t, "m1", 50)
	e.waitDepth(t, "m2", 10)
	if a, b := numsub("m1"), numsub("m2"); a != 1 || b != 1 {
		t.Errorf("subscribers: m1 %d, m2 %d; want one connection for all 60 waiters", a, b)
	}
	open.Store(true)
	for _, m := range []string{"m1", "m2"} {
		if err := e.a.Notify(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if served.Load() != 60 {
		t.Errorf("served %d of 60", served.Load())
	}
	if a, b := numsub("m1"), numsub("m2"); a != 0 || b != 0 {
		t.Errorf("subscribers after every wait ended: m1 %d, m2 %d; want none", a, b)
	}
}
