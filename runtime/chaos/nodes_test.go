package chaos_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/coldstart"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// cloudNode is a cloud engine of model on sim at url, as the cluster's
// controller lists it.
func cloudNode(id, url string, sim *enginesim.Sim) orchestrator.CloudNode {
	return orchestrator.CloudNode{ID: id, URL: url, Models: []registry.ModelSlot{{Name: model, ServedName: sim.ServedModelName(),
		MaxNumSeqs: sim.MaxNumSeqs(), MaxModelLen: int(sim.MaxModelLen()), KVCapacityTokens: sim.Stats().KVBlocksTotal * 16}}}
}

// waitServed sends short requests until one is served.
func waitServed(t *testing.T, client *http.Client, url, key, what string) {
	t.Helper()
	for i, deadline := 0, time.Now().Add(time.Minute); ; i++ {
		if o := send(t.Context(), client, url, key, shortBody(model, "ready", i), nil); o.whole() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no request served within a minute", what)
		}
		time.Sleep(50 * time.Millisecond) // a poll's pause
	}
}

// TestSpotDrain: the notice of a spot reclaim drains one of the 8B
// model's two cloud replicas while streams run on both (the cluster
// controller sees the pod's Node disrupted and drains it, as DrainCloud
// does here). Every in-flight stream finishes whole, the drained replica
// gets no new work once the notice is in routing (the replica's next
// snapshot), and the other serves everything sent after that.
func TestSpotDrain(t *testing.T) {
	n := size(t, 20, 200)
	engine := func(seed int64) enginesim.Config {
		// Answers run to max_tokens: 200 tokens, several seconds each.
		return enginesim.Config{ServedModelName: model, Seed: seed, TimeScale: 1, MeanAnswerTokens: 1_000_000, MaxNumSeqs: 2 * n}
	}
	spot, spotURL := platformtest.ServeSim(t, engine(1))
	onDemand, onDemandURL := platformtest.ServeSim(t, engine(2))
	p := platformtest.Start(t, platformtest.Options{StreamIdleTimeout: time.Hour, RedisTimeout: time.Minute,
		Cloud: []orchestrator.CloudNode{cloudNode("spot-a", spotURL, spot), cloudNode("ondemand-b", onDemandURL, onDemand)}})
	p.Model(model, model)
	key, client := tenant(t, p, adminwire.CreateKeyRequest{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitServed(t, client, p.URL, key, "before the drain")

	inFlight := openStreams(ctx, client, p.URL, key, "in flight", n, 200)
	inFlight.waitStarted()
	onSpot := spot.Stats().Running
	if onSpot == 0 || onDemand.Stats().Running == 0 {
		t.Fatalf("the router put %d streams on the spot replica and %d on the other: the scenario needs both busy",
			onSpot, onDemand.Stats().Running)
	}
	seenSpot, seenOther := requestsSeen(spot), requestsSeen(onDemand)
	if err := p.Orchestrator().DrainCloud(ctx, []string{"spot-a"}, "spot interruption notice"); err != nil {
		t.Fatal(err)
	}
	// The drain reaches routing with the replica's next snapshot (a
	// refresh the drain asks for at once); requests sent from then on
	// must all go to the other replica.
	testenv.EventuallyNil(t, time.Minute, "the drained replica out of routing", func() error {
		if got := p.Replicas[0].Gauge("llmplat_orchestrator_nodes", "state", "draining"); got != 1 {
			return fmt.Errorf("%v nodes draining in the routing snapshot", got)
		}
		return nil
	})
	after := openStreams(ctx, client, p.URL, key, "after the notice", n, 5)
	var whole, afterWhole int
	for _, o := range after.wait() {
		if o.whole() {
			afterWhole++
		}
	}
	outs := inFlight.wait()
	for _, o := range outs {
		if o.whole() {
			whole++
		} else {
			t.Errorf("an in-flight stream did not finish whole: %+v", o)
		}
	}
	took := requestsSeen(spot) - seenSpot
	if afterWhole != n || took != 0 {
		t.Errorf("after the notice %d of %d requests finished whole; the drained replica took %d", afterWhole, n, took)
	}
	b := checkBooks(t, p)
	figure(t, "%d streams in flight on two cloud replicas (%d on the spot one) when its reclaim notice drained it: %d finished whole; %d of %d requests sent after the notice served whole, %d by the drained replica and %d by the other; books: %d settled, none reserved",
		n, onSpot, whole, afterWhole, n, took, requestsSeen(onDemand)-seenOther, b.Settled)
}

// TestUnresponsiveNode: a node stops answering without closing its socket
// (a hung host: the link takes bytes and nothing comes back). Requests
// routed to it in the meantime stream nothing; the orchestrator stops
// routing to it after two missed heartbeats, and each of those requests
// is retried once on the other node and served.
func TestUnresponsiveNode(t *testing.T) {
	n := size(t, 6, 40)
	p := start(t)
	link := p.NodeLink()
	p.StartNodeVia(link, "node-hung", model, enginesim.Config{ServedModelName: model, Seed: 1, TimeScale: 50}, 4*n)
	t.Cleanup(link.Thaw) // before the agent stops: its shutdown must reach nobody, not wait on a frozen link
	key, client := tenant(t, p, adminwire.CreateKeyRequest{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitServed(t, client, p.URL, key, "before the hang")

	// The node hangs just after a heartbeat, so that it is routed to
	// for the two heartbeat intervals docs/requirements.md allows.
	last := lastSeen(t, p, "node-hung")
	testenv.EventuallyNil(t, 30*time.Second, "a heartbeat from the node", func() error {
		if seen := lastSeen(t, p, "node-hung"); seen.Equal(last) {
			return fmt.Errorf("last seen still %v", seen)
		}
		return nil
	})
	link.Freeze()
	hungAt := time.Now()
	beat := lastSeen(t, p, "node-hung")
	// Every request sent now goes to the hung node, the only one.
	hung := openStreams(ctx, client, p.URL, key, "to the hung node", n, 5)
	testenv.EventuallyNil(t, 30*time.Second, fmt.Sprintf("%d requests waiting on the hung node", n), func() error {
		if got := p.Orchestrator().Pending(ctx)[model]; got < int64(n) {
			return fmt.Errorf("%d waiting", got)
		}
		return nil
	})
	// The node the retries go to comes up meanwhile.
	other := p.StartNode("node-other", model, enginesim.Config{ServedModelName: model, Seed: 2, TimeScale: 50}, 4*n)
	var unhealthy time.Duration
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		nd, err := p.Registry.Get(ctx, "node-hung")
		if err != nil || !nd.Healthy(time.Now()) {
			unhealthy = time.Since(hungAt)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hung node still counts as healthy a minute after it hung")
		}
	}
	outs := hung.wait()
	// They were taken back while the node's socket was still up (it
	// drops at ReadTimeout, three beats), not when it dropped.
	if _, err := p.Registry.Get(ctx, "node-hung"); err != nil {
		t.Errorf("the hung node's record after its requests were retried: %v; want them retried before its socket dropped", err)
	}
	var slowest time.Duration
	for _, o := range outs {
		slowest = max(slowest, o.took)
		if !o.whole() {
			t.Errorf("a request sent to the hung node was not served: %+v", o)
		}
	}
	retries := p.Replicas[0].Counter("llmplat_orchestrator_retries_total")
	if retries != float64(n) {
		t.Errorf("%v retries, want one for each of the %d requests on the hung node", retries, n)
	}
	// From now on nothing goes to the hung node: every request is served
	// at once, with no retry.
	var served int
	for i := range n {
		if send(ctx, client, p.URL, key, shortBody(model, "after", i), nil).whole() {
			served++
		}
	}
	if served != n || p.Replicas[0].Counter("llmplat_orchestrator_retries_total") != retries {
		t.Errorf("after the node was dropped %d of %d requests served, %v retries more", served, n,
			p.Replicas[0].Counter("llmplat_orchestrator_retries_total")-retries)
	}
	b := checkBooks(t, p)
	figure(t, "node hung %v after its last heartbeat: out of routing %v after it (two beats missed); the %d requests routed to it meanwhile streamed nothing, were retried once (%v retries) on the other node and all served, the slowest in %v; %d of %d sent afterwards served at once by the other node (%d taken in all); books: %d settled, none reserved",
		hungAt.Sub(beat).Round(time.Millisecond), (hungAt.Sub(beat) + unhealthy).Round(time.Millisecond), n, retries,
		slowest.Round(time.Millisecond), served, n, requestsSeen(other.Sim), b.Settled)
}

// lastSeen is the registry's time of node id's last heartbeat.
func lastSeen(t *testing.T, p *platformtest.Platform, id string) time.Time {
	t.Helper()
	nd, err := p.Registry.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return nd.LastSeen
}

// TestScaledToZero: the 70B model has no replica (KEDA scaled it to zero).
// Its first caller is held for its wake (a short hold here, as a client
// whose own timeout is short sees it; the hold itself is the gateway's
// TestWakeHold and the twin's wake scenario), then answered — not after
// the queue limit — with 503 model_loading and a Retry-After of the expected load time, and
// counts as demand on the orchestrators' pending gauge, which is what
// wakes the autoscaler. While the new replica loads its weights
// (simulated load time) callers get 503 at once with a Retry-After that
// shrinks as the wake runs, and the gauge stays up; once the replica is
// ready they are served and the gauge drops. No refusal leaves a ledger
// row.
func TestScaledToZero(t *testing.T) {
	const big = "llama-70b"
	queueLimit := time.Duration(size(t, 3, 30)) * time.Second // the required 30 s at full size
	p := platformtest.Start(t, platformtest.Options{StreamIdleTimeout: time.Hour, RedisTimeout: time.Minute, QueueLimit: queueLimit,
		WakeHold: 100 * time.Millisecond})
	p.Model(big, big)
	key, client := tenant(t, p, adminwire.CreateKeyRequest{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The orchestrators learn of a newly declared model within seconds;
	// until then its callers queue as before, and each leaves a cancelled
	// ledger row.
	var o outcome
	queued := 0
	for deadline := time.Now().Add(time.Minute); ; queued++ {
		o = send(ctx, client, p.URL, key, shortBody(big, "first", 0), nil)
		if strings.Contains(o.body, "model_loading") || time.Now().After(deadline) {
			break
		}
	}
	load := int(coldstart.DefaultExpectedLoad / time.Second)
	if o.status != http.StatusServiceUnavailable || retryAfter(o) > load || retryAfter(o) < load-5 {
		t.Fatalf("the first request: %d %q, Retry-After %q; want 503 model_loading with Retry-After about %d s", o.status, o.body, o.retryAfter, load)
	}
	if o.took >= queueLimit {
		t.Errorf("the refusal at zero took %v: it waited in the queue", o.took)
	}
	pending := p.Orchestrator().Pending(ctx)[big]
	if pending < 1 {
		t.Fatalf("pending gauge %d after the refusal, want the caller held as demand", pending)
	}

	// The replica comes up and loads: 8 minutes of an L40S's loading, the
	// reference workload's cold start, at the simulator's time scale.
	// The load starts only once the test has seen callers refused while
	// it is pending, so a slow machine (a StartNode that takes longer
	// than the simulated load) cannot skip the scenario.
	const scale = 160
	engineLoad := &heldLoad{Clock: enginesim.NewScaledClock(scale), release: make(chan struct{})}
	startedAt := time.Now()
	node := p.StartNode("node-70b", big, enginesim.Config{ServedModelName: big, Seed: 1, TimeScale: scale,
		LoadTime: 8 * time.Minute, Clock: engineLoad}, 16)
	var refused, admitted int
	lastRetry := retryAfter(o)
	var servedAfter time.Duration
	for i := 0; ; i++ {
		if refused == 3 {
			engineLoad.start()
		}
		o := send(ctx, client, p.URL, key, shortBody(big, "while loading", i), nil)
		if o.whole() {
			servedAfter, _ = engineLoad.since()
			break
		}
		if o.status != http.StatusServiceUnavailable || retryAfter(o) <= 0 {
			t.Fatalf("while the replica loads: %d %q, Retry-After %q (err %v); want 503 with Retry-After", o.status, o.body, o.retryAfter, o.err)
		}
		switch {
		case !strings.Contains(o.body, "model_loading"):
			// Between the node's registration and its first heartbeat
			// (which says the engine is loading) a request is admitted
			// and routed to it.
			admitted++
		case retryAfter(o) > lastRetry:
			t.Errorf("Retry-After grew from %d to %d s as the wake went on", lastRetry, retryAfter(o))
		default:
			lastRetry = retryAfter(o)
		}
		if got := p.Orchestrator().Pending(ctx)[big]; got < 1 && !node.Sim.Ready() {
			t.Errorf("pending gauge %d while the replica loads, want the refused callers held", got)
		}
		refused++
		if since, ok := engineLoad.since(); ok && since > time.Minute+8*time.Minute/scale {
			t.Fatal("not served a minute after the replica loaded")
		}
		if time.Since(startedAt) > 2*time.Minute {
			t.Fatalf("%d refusals in two minutes; the load never started", refused)
		}
		time.Sleep(100 * time.Millisecond) // a client's pause between tries
	}
	if refused == 0 {
		t.Error("no request was refused while the replica loaded: the scenario showed nothing")
	}
	if !node.Sim.Ready() {
		t.Error("a request was served before the engine had loaded")
	}
	testenv.EventuallyNil(t, time.Minute, "the pending gauge at 0 after the replica served", func() error {
		if got := p.Orchestrator().Pending(ctx)[big]; got != 0 {
			return fmt.Errorf("pending gauge %d", got)
		}
		return nil
	})
	b := checkBooks(t, p)
	if b.Cancelled != queued+admitted {
		t.Errorf("%d ledger rows cancelled for %d requests that queued before the model was known and %d admitted before the node's first heartbeat: a refusal at zero reserved",
			b.Cancelled, queued, admitted)
	}
	figure(t, "no 70B replica: %d requests queued before the orchestrator knew the new model; then the first request got 503 model_loading at once (%v) with Retry-After %s s, pending gauge %d; a replica loading for 8 min simulated (%v here): %d requests meanwhile got 503 with Retry-After (%d of them admitted before the node's first heartbeat; the others model_loading, down to %d s), then served %v after its load started, and the gauge dropped to 0; books: %d settled, %d cancelled, none reserved",
		queued, o.took.Round(time.Millisecond), o.retryAfter, pending, (8 * time.Minute / scale).Round(time.Millisecond), refused, admitted, lastRetry,
		servedAfter.Round(time.Millisecond), b.Settled, b.Cancelled)
}

// heldLoad is a simulator clock whose first sleep, the engine's load,
// waits until start is called.
type heldLoad struct {
	enginesim.Clock
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	at      time.Time // when start was called
	held    atomic.Bool
}

func (h *heldLoad) Sleep(ctx context.Context, d time.Duration) error {
	if h.held.CompareAndSwap(false, true) {
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return h.Clock.Sleep(ctx, d)
}

// start lets the load begin.
func (h *heldLoad) start() {
	h.once.Do(func() {
		h.mu.Lock()
		h.at = time.Now()
		h.mu.Unlock()
		close(h.release)
	})
}

// since is how long ago the load started, if it has.
func (h *heldLoad) since() (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.at.IsZero() {
		return 0, false
	}
	return time.Since(h.at), true
}

// retryAfter is o's Retry-After in seconds (0 when absent or unreadable).
func retryAfter(o outcome) int {
	n, err := strconv.Atoi(o.retryAfter)
	if err != nil {
		return 0
	}
	return n
}

// TestOrchestratorRestart: every orchestrator replica restarts at once
// with many nodes connected. Registrations never pass the cluster-wide
// rate in any second, every node comes back under a new registration,
// and requests are served again.
func TestOrchestratorRestart(t *testing.T) {
	nodes := size(t, 50, 1000)
	const rate = orchestrator.DefaultRegistrationsPerSecond
	p := platformtest.Start(t, platformtest.Options{Replicas: 2, StreamIdleTimeout: time.Hour, RedisTimeout: time.Minute})
	p.Model(model, model)
	// One engine behind every agent: the scenario is the sockets.
	sim, url := platformtest.ServeSim(t, enginesim.Config{ServedModelName: model, Seed: 1, TimeScale: 50, MaxNumSeqs: 64})
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { p.StartAgent(p.Replicas[i%2].WSURL, fmt.Sprintf("node-%04d", i), model, sim, url) })
		if i%32 == 31 {
			wg.Wait() // issue the tokens a batch at a time
		}
	}
	wg.Wait()
	within := time.Duration(nodes/rate)*time.Second*4 + 2*time.Minute
	epochs := waitAll(t, p, nodes, nil, within)
	key, client := tenant(t, p, adminwire.CreateKeyRequest{})
	waitServed(t, client, p.URL, key, "before the restart")

	restart := time.Now()
	p.RestartOrchestrators()
	waitServed(t, client, p.URL, key, "after the restart")
	servedAgain := time.Since(restart)
	waitAll(t, p, nodes, epochs, within)
	took := time.Since(restart)
	var busiest, total int
	err := p.DB.QueryRowContext(t.Context(), `SELECT coalesce(max(n), 0), coalesce(sum(n), 0) FROM (
		SELECT count(*) AS n FROM node_events WHERE kind = 'register' AND created_at >= $1
		GROUP BY date_trunc('second', created_at)) s`, restart).Scan(&busiest, &total)
	if err != nil {
		t.Fatal(err)
	}
	if busiest > rate || total < nodes {
		t.Errorf("%d registrations after the restart, the busiest second %d (limit %d); want every node's, within the limit", total, busiest, rate)
	}
	b := checkBooks(t, p)
	figure(t, "%d nodes on 2 replicas, both restarted at once: all %d re-registered in %v (floor at %d/s: %v), the busiest second %d registrations (limit %d); requests served again %v after the restart; books: %d settled, none reserved",
		nodes, nodes, took.Round(time.Millisecond), rate, time.Duration(nodes/rate)*time.Second, busiest, rate,
		servedAgain.Round(time.Millisecond), b.Settled)
}

// waitAll waits until n nodes are registered and, when after is set, each
// under a newer epoch than in after; it returns their epochs.
func waitAll(t *testing.T, p *platformtest.Platform, n int, after map[string]int64, within time.Duration) map[string]int64 {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		nodes, err := p.Registry.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		epochs := make(map[string]int64, len(nodes))
		for _, nd := range nodes {
			if old, ok := after[nd.ID]; nd.Owner != "" && (after == nil || (ok && nd.Epoch > old)) {
				epochs[nd.ID] = nd.Epoch
			}
		}
		if len(epochs) == n {
			return epochs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d nodes registered after %v", len(epochs), n, within)
		}
	}
}
