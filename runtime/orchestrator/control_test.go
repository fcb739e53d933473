package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestDrain drains a node through the control that the admin API uses,
// from a replica that does not own its socket: no new work reaches it, its
// streams finish, the agent exits, and the database says drained.
func TestDrain(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	n := c.startNode("node-1", b, nodeOpts{sim: enginesim.Config{TimeScale: 4}})
	c.waitNode(n.id, "orch-b")

	const streams = 3
	results := make(chan result, streams)
	for i := range streams {
		st, err := b.o().Dispatch(t.Context(), job(fmt.Sprintf("long-%d", i), 400))
		if err != nil {
			t.Fatal(err)
		}
		go func() { results <- drain(st) }()
	}
	ctl := orchestrator.NewControl(c.reg, c.rdb, c.events, nil)
	if err := ctl.Drain(t.Context(), n.id); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(c.t, "the registry marks the node draining", func() bool {
		got, err := c.reg.Get(t.Context(), n.id)
		return err == nil && got.State == registry.StateDraining
	})
	c.waitSnapshots("the drain", n.id, func(got registry.Node, ok bool) bool { return ok && got.State == registry.StateDraining })
	for _, r := range []*replica{a, b} {
		if _, err := r.o().Dispatch(t.Context(), job("after-drain-"+r.id, 10)); !errors.Is(err, dispatch.ErrNoCapacity) {
			t.Errorf("a request to %s after the drain got %v, want ErrNoCapacity", r.id, err)
		}
	}
	for range streams {
		if r := <-results; !r.complete() {
			t.Errorf("in-flight stream ended with %v during the drain; want it to finish", r.err)
		}
	}
	select {
	case err := <-n.agentRun:
		if err != nil {
			t.Errorf("agent ended with %v", err)
		}
		n.agentRun <- err // for the cleanup
	case <-time.After(testenv.WaitFor):
		t.Fatal("agent did not exit after its drain")
	}
	testenv.Eventually(c.t, "the node's row says drained", func() bool {
		var state string
		err := c.db.QueryRowContext(t.Context(), "SELECT state FROM nodes WHERE id = $1", n.id).Scan(&state)
		return err == nil && state == "drained"
	})
	var kinds []string
	rows, err := c.db.QueryContext(t.Context(), "SELECT kind FROM node_events WHERE node_id = $1 ORDER BY id", n.id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, k)
	}
	if want := []string{"register", "drain", "deregister"}; fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("node events %v, want %v", kinds, want)
	}
}

// TestRevokedTokenClosesSocket revokes a connected node's token: its
// socket closes within seconds and it cannot register again.
func TestRevokedTokenClosesSocket(t *testing.T) {
	c := newCluster(t)
	c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	n := c.startNode("node-1", b, nodeOpts{})
	c.waitNode(n.id, "orch-b")

	if _, _, err := c.tokens.Revoke(t.Context(), n.tokenID, time.Now()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := orchestrator.NewControl(c.reg, c.rdb, c.events, nil).RevokeNodeToken(t.Context(), n.id, n.tokenID); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(c.t, "the node leaves the registry", func() bool {
		_, err := c.reg.Get(t.Context(), n.id)
		return errors.Is(err, registry.ErrNotFound)
	})
	// The push, not the periodic recheck, closed the socket: the recheck
	// would take TokenRecheckInterval.
	if took := time.Since(start); took >= orchestrator.TokenRecheckInterval {
		t.Errorf("socket closed %v after the revocation, want before the %v recheck", took, orchestrator.TokenRecheckInterval)
	}
	time.Sleep(3 * time.Second) // the agent's backoff: it tries again and is refused
	if _, err := c.reg.Get(t.Context(), n.id); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("the node came back with a revoked token: %v", err)
	}
}

// TestPendingGauge reports the gateways' queue for a declared model that
// no node serves, so the autoscaler can wake it.
func TestPendingGauge(t *testing.T) {
	c := newCluster(t)
	queue, err := quota.NewQueue(c.rdb, quota.Config{Prefix: c.prefix})
	if err != nil {
		t.Fatal(err)
	}
	a := c.startReplica("orch-a", func(cfg *orchestrator.Config) {
		cfg.Models = func(context.Context) ([]string, error) { return []string{"llama-8b", "llama-70b"}, nil }
		cfg.Pending = queue.Depth
	})
	if got := a.o().Pending(t.Context()); got["llama-70b"] != 0 || got["llama-8b"] != 0 || len(got) != 2 {
		t.Fatalf("pending before any request = %v, want both models at 0", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	waiting := make(chan error, 1)
	go func() {
		waiting <- queue.Wait(ctx, "llama-70b", "r-70b", time.Minute, func(ctx context.Context) (bool, error) {
			_, err := a.o().Dispatch(ctx, jobFor("r-70b", "llama-70b", 10))
			return !errors.Is(err, dispatch.ErrNoCapacity), nil
		})
	}()
	testenv.Eventually(c.t, "the waiting request shows in the gauge", func() bool { return a.o().Pending(t.Context())["llama-70b"] == 1 })
	cancel()
	<-waiting
}

// TestNodeDrainsItself: a node whose pod is going away drains on its own
// (the agent got SIGTERM): every replica stops routing to it at once, its
// in-flight stream finishes whole, and the node leaves the registry.
func TestNodeDrainsItself(t *testing.T) {
	c := newCluster(t)
	a := c.startReplica("orch-a", nil)
	b := c.startReplica("orch-b", nil)
	n1 := c.startNode("node-1", a, nodeOpts{sim: enginesim.Config{TimeScale: 5}})
	c.waitNode(n1.id, "orch-a")
	st, err := b.o().Dispatch(t.Context(), job("leaving", 300))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan result, 1)
	go func() { got <- drain(st) }()
	n1.agent.Drain(0)
	c.waitSnapshots("node-1 draining", n1.id, func(n registry.Node, ok bool) bool {
		return !ok || n.State == registry.StateDraining
	})
	if _, err := b.o().Dispatch(t.Context(), job("after", 5)); !errors.Is(err, dispatch.ErrNoCapacity) {
		t.Errorf("dispatch to a draining node's model: %v, want ErrNoCapacity", err)
	}
	select {
	case r := <-got:
		if !r.complete() {
			t.Errorf("the in-flight stream: %+v, want it complete", r)
		}
	case <-time.After(time.Minute):
		t.Fatal("the in-flight stream hangs")
	}
	testenv.Eventually(c.t, "node-1 gone from the registry", func() bool {
		_, err := c.reg.Get(t.Context(), n1.id)
		return errors.Is(err, registry.ErrNotFound)
	})
}

// TestLiveHealthFollowsTheClock: Control.Live judges a node's health at
// its clock, not the machine's: the same record is healthy at its last
// beat and unhealthy once the clock is past registry.HealthyWithin.
func TestLiveHealthFollowsTheClock(t *testing.T) {
	c := newCluster(t)
	if _, err := c.reg.Register(t.Context(), registry.NodeRecord{ID: "node-1", Owner: "orch-a", Location: registry.LocationOnPrem,
		Models: []registry.ModelSlot{{Name: testModel, ServedName: "sim", MaxNumSeqs: 8, MaxModelLen: 8192, KVCapacityTokens: 1000}}}); err != nil {
		t.Fatal(err)
	}
	n, err := c.reg.Get(t.Context(), "node-1")
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(n.LastSeen)
	ctl := orchestrator.NewControl(c.reg, c.rdb, c.events, clk)
	for _, tt := range []struct {
		name    string
		at      time.Time
		healthy bool
	}{
		{"at its last beat", n.LastSeen, true},
		{"at the end of its healthy span", n.LastSeen.Add(registry.HealthyWithin), true},
		{"past its healthy span", n.LastSeen.Add(registry.HealthyWithin + time.Millisecond), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk.SetTime(tt.at)
			live, err := ctl.Live(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got, ok := live["node-1"]
			if !ok {
				t.Fatalf("Live = %v, want node-1", live)
			}
			if got.Healthy != tt.healthy {
				t.Errorf("healthy = %v at %v after the last beat, want %v", got.Healthy, tt.at.Sub(n.LastSeen), tt.healthy)
			}
		})
	}
}

// TestEventsTellTimeByTheReplicasClock: a replica whose event store is
// built by controlplane dates the node's row by the replica's
// Config.Clock, as the rest of its logic.
func TestEventsTellTimeByTheReplicasClock(t *testing.T) {
	c := newCluster(t)
	at := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	b := c.startReplica("orch-b", func(cfg *orchestrator.Config) {
		cfg.Clock = clocktesting.NewFakeClock(at)
	})
	n := c.startNode("node-1", b, nodeOpts{})
	testenv.EventuallyNil(t, testenv.WaitFor, "the node's row dated by the replica's clock", func() error {
		var seen time.Time
		err := c.db.QueryRowContext(t.Context(), "SELECT last_seen FROM nodes WHERE id = $1", n.id).Scan(&seen)
		if err == nil && !seen.Equal(at) {
			err = fmt.Errorf("last_seen %v", seen)
		}
		return err
	})
}
