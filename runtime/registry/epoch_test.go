package registry

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestStaleConnectionRefused: connection A registers, then connection B of
// the same node registers on another replica. Everything A's replica sends
// afterwards is refused and B's record stays as B wrote it.
func TestStaleConnectionRefused(t *testing.T) {
	env := testenv.Redis(t)
	ra := newRegistry(t, env.Client(), env.Prefix)
	rb := newRegistry(t, env.Client(), env.Prefix)
	ctx := context.Background()
	ea := mustRegister(t, ra, onPrem("n1", "orch-a", "llama-8b"))
	eb := mustRegister(t, rb, onPrem("n1", "orch-b", "llama-8b"))
	if ea != 1 || eb != 2 {
		t.Fatalf("got epochs %d, %d; want 1, 2", ea, eb)
	}
	if ok, err := rb.Heartbeat(ctx, "n1", eb, Heartbeat{QueueDepth: 4, KVCacheUsage: 0.25, GPUUtil: ptr(0.5)}); err != nil || !ok {
		t.Fatalf("B's beat = %v, %v; want accepted", ok, err)
	}
	want, err := rb.Get(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func() (bool, error)
	}{
		{"heartbeat", func() (bool, error) {
			return ra.Heartbeat(ctx, "n1", ea, Heartbeat{QueueDepth: 99, KVCacheUsage: 1})
		}},
		{"set state", func() (bool, error) { return ra.SetState(ctx, "n1", ea, StateDraining) }},
		{"deregister", func() (bool, error) { return ra.Deregister(ctx, "n1", ea) }},
		{"future epoch", func() (bool, error) { return ra.Heartbeat(ctx, "n1", eb+1, Heartbeat{}) }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			ok, err := c.call()
			if err != nil || ok {
				t.Fatalf("A's %s = %v, %v; want refused", c.name, ok, err)
			}
			got, err := rb.Get(ctx, "n1")
			if err != nil {
				t.Fatalf("B's record after A's %s: %v", c.name, err)
			}
			if !equalNodes(got, want) {
				t.Errorf("B's record after A's %s:\n got %+v\nwant %+v", c.name, got, want)
			}
		})
	}
	if ok, err := rb.Deregister(ctx, "n1", eb); err != nil || !ok {
		t.Errorf("B's own deregister = %v, %v; want done", ok, err)
	}
}

// equalNodes compares two records, GPUUtil by value.
func equalNodes(a, b Node) bool {
	ga, gb := a.GPUUtil, b.GPUUtil
	a.GPUUtil, b.GPUUtil = nil, nil
	return fmt.Sprint(a) == fmt.Sprint(b) && (ga == nil) == (gb == nil) && (ga == nil || *ga == *gb)
}

// TestEpochsIncreaseAcrossExpiry: the counter outlives the record, so the
// node's next connection outranks every earlier one even after its record
// expired.
func TestEpochsIncreaseAcrossExpiry(t *testing.T) {
	env := testenv.Redis(t)
	r := newRegistry(t, env.Client(), env.Prefix)
	ctx := context.Background()
	var last int64
	for i := range 3 {
		epoch := mustRegister(t, r, onPrem("n1", "orch-1"))
		if epoch <= last {
			t.Fatalf("registration %d got epoch %d after %d, want more", i, epoch, last)
		}
		last = epoch
		time.Sleep(testTTL + testSlack)
		if _, err := r.Get(ctx, "n1"); err == nil {
			t.Fatalf("record %d still there after the TTL", i)
		}
	}
	if ok, _ := r.Heartbeat(ctx, "n1", last, Heartbeat{}); ok {
		t.Errorf("a beat revived an expired record")
	}
}

// TestConcurrentRegistration: two replicas, each with its own client,
// register the same node 100 times at once. Every epoch is handed out once,
// each connection's epochs increase in its own order, and the record left
// over is the one of the highest epoch.
func TestConcurrentRegistration(t *testing.T) {
	env := testenv.Redis(t)
	replicas := []*Registry{
		newRegistry(t, env.Client(), env.Prefix),
		newRegistry(t, env.Client(), env.Prefix),
	}
	const workers, each = 10, 10 // 100 registrations
	ctx := context.Background()
	var mu sync.Mutex
	owners := map[int64]string{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := replicas[w%len(replicas)]
			owner := fmt.Sprintf("orch-%d-w%d", w%len(replicas), w)
			var prev int64
			for range each {
				epoch, err := r.Register(ctx, onPrem("n1", owner, "llama-8b"))
				if err != nil {
					t.Errorf("Register: %v", err)
					return
				}
				if epoch <= prev {
					t.Errorf("%s got epoch %d after %d", owner, epoch, prev)
				}
				prev = epoch
				mu.Lock()
				if o, dup := owners[epoch]; dup {
					t.Errorf("epoch %d handed to %s and %s", epoch, o, owner)
				}
				owners[epoch] = owner
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	epochs := make([]int64, 0, len(owners))
	for e := range owners {
		epochs = append(epochs, e)
	}
	slices.Sort(epochs)
	if len(epochs) != workers*each || epochs[0] != 1 || epochs[len(epochs)-1] != workers*each {
		t.Fatalf("got %d distinct epochs from %d to %d, want 1..%d", len(epochs), epochs[0], epochs[len(epochs)-1], workers*each)
	}
	got, err := replicas[0].Get(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	top := epochs[len(epochs)-1]
	if got.Epoch != top || got.Owner != owners[top] {
		t.Errorf("final record has epoch %d of %s, want %d of %s", got.Epoch, got.Owner, top, owners[top])
	}
	for _, e := range epochs[:len(epochs)-1] {
		if ok, err := replicas[int(e)%2].Heartbeat(ctx, "n1", e, Heartbeat{}); err != nil || ok {
			t.Fatalf("beat of superseded epoch %d = %v, %v; want refused", e, ok, err)
		}
	}
	if ok, err := replicas[1].Heartbeat(ctx, "n1", top, Heartbeat{}); err != nil || !ok {
		t.Errorf("beat of the final epoch %d = %v, %v; want accepted", top, ok, err)
	}
}
