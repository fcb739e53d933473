package registry

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// death is one report of a Watch.
type death struct {
	id    string
	epoch int64
	at    time.Time
}

// deaths collects a Watch's reports.
type deaths struct {
	mu   sync.Mutex
	list []death
}

func (d *deaths) report(id string, epoch int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.list = append(d.list, death{id: id, epoch: epoch, at: time.Now()})
}

func (d *deaths) get() []death {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]death(nil), d.list...)
}

// startWatch runs r.Watch until the test ends and returns its reports.
func startWatch(t *testing.T, r *Registry) *deaths {
	t.Helper()
	d := &deaths{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1) // Watch's result; read once at cleanup
	go func() { done <- r.Watch(ctx, d.report) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch returned %v, want nil", err)
		}
	})
	return d
}

// beatUntil beats nodeID every third of the TTL until stop is closed.
func beatUntil(t *testing.T, r *Registry, nodeID string, epoch int64, stop <-chan struct{}) {
	t.Helper()
	ticker := time.NewTicker(testTTL / 3)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
			if ok, err := r.Heartbeat(context.Background(), nodeID, epoch, Heartbeat{}); err != nil || !ok {
				t.Errorf("beat of %s = %v, %v", nodeID, ok, err)
				return
			}
		}
	}
}

// TestWatchReportsDeathOnce: two replicas watch. A node that stops beating
// is reported by both, once each, no earlier than the TTL and within TTL +
// poll interval of its last beat (plus scheduling slack), while a node that
// keeps beating is never reported. The dead node comes back under a new
// epoch, dies again and is reported again with that epoch.
func TestWatchReportsDeathOnce(t *testing.T) {
	env := testenv.Redis(t)
	ra := newRegistry(t, env.Client(), env.Prefix)
	rb := newRegistry(t, env.Client(), env.Prefix)
	watchers := []*deaths{startWatch(t, ra), startWatch(t, rb)}

	steady := mustRegister(t, rb, onPrem("steady", "orch-b"))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { beatUntil(t, rb, "steady", steady, stop) })
	defer wg.Wait()
	defer close(stop)

	for round := range 2 {
		epoch := mustRegister(t, ra, onPrem("n1", "orch-a", "llama-8b"))
		time.Sleep(testTTL / 3)
		if ok, err := ra.Heartbeat(context.Background(), "n1", epoch, Heartbeat{}); err != nil || !ok {
			t.Fatalf("beat = %v, %v", ok, err)
		}
		lastBeat := time.Now()
		for i, w := range watchers {
			testenv.EventuallyWithin(t, testTTL+testInterval+2*testSlack, "the death of n1", func() bool { return len(w.get()) > round })
			got := w.get()[round]
			if got.id != "n1" || got.epoch != epoch {
				t.Errorf("round %d watcher %d reported %s epoch %d, want n1 epoch %d", round, i, got.id, got.epoch, epoch)
			}
			took := got.at.Sub(lastBeat)
			if took < testTTL-testSlack/3 || took > testTTL+testInterval+testSlack {
				t.Errorf("round %d watcher %d reported %v after the last beat, want within [%v, %v]",
					round, i, took, testTTL, testTTL+testInterval+testSlack)
			}
		}
		time.Sleep(4 * testInterval)
		for i, w := range watchers {
			if got := w.get(); len(got) != round+1 {
				t.Errorf("round %d watcher %d has %d reports, want %d: %+v", round, i, len(got), round+1, got)
			}
		}
	}
}

// TestWatchIgnoresDeregistered: a node that leaves cleanly is no death.
func TestWatchIgnoresDeregistered(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	r := newRegistry(t, rdb, env.Prefix)
	d := startWatch(t, r)
	epoch := mustRegister(t, r, onPrem("n1", "orch-1"))
	time.Sleep(3 * testInterval) // Watch sees it alive
	if ok, err := r.Deregister(context.Background(), "n1", epoch); err != nil || !ok {
		t.Fatalf("Deregister = %v, %v", ok, err)
	}
	if n := rdb.ZCard(context.Background(), r.Keys().Live()).Val(); n != 0 {
		t.Errorf("nodes:live has %d members after Deregister, want 0", n)
	}
	time.Sleep(testTTL + testInterval + testSlack)
	if got := d.get(); len(got) != 0 {
		t.Errorf("got reports %+v for a deregistered node, want none", got)
	}
}

// TestWatchSkipsDeathsBeforeItStarted: a record that expired before Watch
// started is cleaned from the index but not reported: no socket of this
// process can have served it.
func TestWatchSkipsDeathsBeforeItStarted(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	r := newRegistry(t, rdb, env.Prefix)
	mustRegister(t, r, onPrem("old", "orch-gone"))
	time.Sleep(testTTL + testSlack)
	d := startWatch(t, r)
	testenv.EventuallyWithin(t, 4*testInterval, "the index to be cleaned", func() bool {
		return rdb.ZCard(context.Background(), r.Keys().Live()).Val() == 0
	})
	time.Sleep(2 * testInterval)
	if got := d.get(); len(got) != 0 {
		t.Errorf("got reports %+v, want none", got)
	}
}

// TestWatchStaleIndexScore: a live node whose index entry lags (the update
// after its beat failed) is probed, found alive and not reported; its later
// death still is.
func TestWatchStaleIndexScore(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	r := newRegistry(t, rdb, env.Prefix)
	d := startWatch(t, r)
	ctx := context.Background()
	epoch := mustRegister(t, r, onPrem("n1", "orch-1"))
	time.Sleep(2 * testInterval)
	if err := rdb.ZAddXX(ctx, r.Keys().Live(), redis.Z{Member: "n1", Score: 1}).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * testInterval)
	if got := d.get(); len(got) != 0 {
		t.Fatalf("got reports %+v for a live node, want none", got)
	}
	testenv.EventuallyWithin(t, testTTL+testInterval+2*testSlack, "the death of n1", func() bool { return len(d.get()) == 1 })
	if got := d.get()[0]; got.id != "n1" || got.epoch != epoch {
		t.Errorf("got %+v, want n1 epoch %d", got, epoch)
	}
}

// TestWatchReturnsOnCancel: Watch returns nil promptly when its context
// ends; TestMain's leak check then finds no goroutine of it.
func TestWatchReturnsOnCancel(t *testing.T) {
	env := testenv.Redis(t)
	r, err := New(env.Client(), Config{Prefix: env.Prefix}) // the default 1 s interval
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Watch(ctx, func(string, int64) {}) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch = %v, want nil", err)
		}
	case <-time.After(time.Second / 2):
		t.Fatal("Watch did not return within 0.5 s of its context ending")
	}
}

// TestDeathReportedAfterAnotherReplicaCleaned: once a replica has seen a
// node alive it reports the node's death even when another replica removed
// the dead node from nodes:live first. Polls are driven by hand so the
// order is certain.
func TestDeathReportedAfterAnotherReplicaCleaned(t *testing.T) {
	env := testenv.Redis(t)
	rdb := env.Client()
	r := newRegistry(t, rdb, env.Prefix)
	other := newRegistry(t, env.Client(), env.Prefix)
	ctx := context.Background()
	d := &deaths{}
	w := watcher{r: r, seen: map[string]struct{}{}, onDead: d.report}
	epoch := mustRegister(t, r, onPrem("n1", "orch-1"))
	if err := w.poll(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(testTTL + testSlack)
	if nodes, err := other.List(ctx); err != nil || len(nodes) != 0 {
		t.Fatalf("other replica's List = %v, %v; want none", nodes, err)
	}
	if n := rdb.ZCard(ctx, r.Keys().Live()).Val(); n != 0 {
		t.Fatalf("nodes:live has %d members after the other replica's List, want 0", n)
	}
	for range 2 {
		if err := w.poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.get(); len(got) != 1 || got[0].id != "n1" || got[0].epoch != epoch {
		t.Errorf("got reports %+v, want one for n1 epoch %d", got, epoch)
	}
}
