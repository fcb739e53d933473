package orchestrator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/llmplat/llmplat/runtime/drain"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/routing"
)

// Orchestrator is one replica of the control plane.
type Orchestrator struct {
	cfg     Config
	keys    registry.Keys
	tracker *routing.Tracker
	// routeMu makes choosing a node and counting the request on it one
	// step: two requests that both saw room for one would otherwise both
	// take it, and overfill the node's KV cache.
	routeMu sync.Mutex
	closing atomic.Bool
	// health is the node socket's /healthz, the load balancer's health
	// check: it fails from the start of Run's drain on.
	health  *drain.Gate
	snap    atomic.Pointer[snapshot]
	cloud   atomic.Pointer[[]registry.Node] // the cloud nodes as last read
	refresh chan struct{}                   // asks refreshLoop for a new snapshot now; size 1
	// cloudKick asks cloudLoop to re-read its source now; size 1.
	cloudKick chan struct{}
	ready     chan struct{} // closed once the reply channel is subscribed
	nodeSub   *redis.PubSub // the channels of the nodes whose sockets are here
	// unsubscribed is set as Run closes the subscriptions: a receive that
	// fails then has ended, not dropped.
	unsubscribed atomic.Bool

	mu     sync.Mutex
	conns  map[string]*nodeConn  // node id → its newest socket here
	remote map[string]*reqStream // forwarded requests awaiting replies
	// attempts draws the nonce of each forwarded try (header.Attempt);
	// replies come back to this replica only, so a counter is unique.
	attempts atomic.Uint64
	// orphans remembers the attempts whose stray replies were answered
	// with a cancel (firstOrphanReply); it has its own lock.
	orphans *cache.LRUExpireCache
	// relayed maps a forwarded request running here to its socket, which
	// may be an older one of its node than conns holds.
	relayed  map[string]*nodeConn
	awaiting map[string]int // model → requests waiting for a first event
	// born is when the replica was made: it publishes no model at zero
	// before zeroAfterStart.
	born time.Time
	// declared is the wake publisher's cache of the declared models; only
	// the refresh loop uses it.
	declared *declared

	connWG sync.WaitGroup // node sockets being served
	// badTokens guards registration against floods of bad tokens.
	badTokens badRegistrations
	// sockets counts the goroutines serving registered sockets, which
	// outlive their HTTP handlers; Run waits for them.
	sockets sync.WaitGroup
	relayWG sync.WaitGroup // relays publishing forwarded requests' frames
	dones   doneRecorder   // done frames on their way to Redis (completions.go)
}

// snapshot is the registry as of the last refresh.
type snapshot struct {
	nodes []registry.Node
	at    time.Time
}

// New returns a replica for cfg; Run starts it and Handler accepts nodes.
func New(cfg Config) (*Orchestrator, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	o := &Orchestrator{
		cfg: c, keys: c.Registry.Keys(), tracker: routing.NewTracker(),
		refresh: make(chan struct{}, 1), cloudKick: make(chan struct{}, 1), ready: make(chan struct{}),
		conns: map[string]*nodeConn{}, remote: map[string]*reqStream{}, awaiting: map[string]int{},
		orphans: cache.NewLRUExpireCacheWithClock(orphansRemembered, c.Clock),
		relayed: map[string]*nodeConn{}, born: c.Clock.Now(), health: drain.NewGate(c.Clock),
		// With no channel yet, Subscribe only creates the handle.
		nodeSub: c.Redis.Subscribe(context.Background()),
	}
	o.snap.Store(&snapshot{})
	c.Metrics.attach(o)
	return o, nil
}

// Ready is closed once Run has subscribed to the replica's reply channel:
// from then on requests can be forwarded to other replicas.
func (o *Orchestrator) Ready() <-chan struct{} { return o.ready }

// Handler returns the replica's HTTP handler: the node socket at
// ConnectPath, and /healthz, the health check of the load balancer in front
// of it, which fails while the replica drains.
func (o *Orchestrator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ConnectPath, o.accept)
	mux.Handle("GET /healthz", o.health)
	return mux
}

// Run serves the replica until ctx ends: the reply channel, the nodes'
// channels, the registry watch and the routing snapshot. When ctx ends it
// drains for Config.DrainDelay (it serves on, new sockets too, with
// /healthz failed), then asks every node to reconnect elsewhere, lets their requests finish for
// Config.ShutdownGrace, and returns once every socket is closed.
func (o *Orchestrator) Run(ctx context.Context) error {
	defer o.cfg.CloudClient.CloseIdleConnections()
	replies := o.cfg.Redis.Subscribe(ctx, o.keys.ReplicaChannel(o.cfg.ID))
	if _, err := replies.Receive(ctx); err != nil {
		_ = replies.Close()
		_ = o.nodeSub.Close()
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("subscribe reply channel: %w", err)
	}
	close(o.ready)
	var wg sync.WaitGroup
	start := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	// The loops outlive ctx by the drain: a draining replica serves on.
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	start(func() { _ = o.cfg.Registry.Watch(work, o.nodeDied) })
	start(func() { o.refreshLoop(work) })
	start(func() { o.cloudLoop(work) })
	start(func() { o.receive(work, replies, o.onReply, o.repliesLost) })
	start(func() { o.receive(work, o.nodeSub, o.onNodeMessage, nil) })
	<-ctx.Done()
	o.health.Drain(o.cfg.DrainDelay)
	stopWork()
	o.shutdown(o.cfg.ShutdownGrace)
	o.relayWG.Wait()
	o.unsubscribed.Store(true)
	_ = replies.Close() // ends the receive loops
	_ = o.nodeSub.Close()
	wg.Wait()
	o.failRemote(errShutdown)
	o.sockets.Wait()
	o.dones.wg.Wait() // the last done frames' records
	return nil
}

// shutdown asks every node on this replica to reconnect elsewhere, spread
// over nodeproto.ReconnectSpread, waits up to grace for their requests,
// then closes what is left with 1001.
func (o *Orchestrator) shutdown(grace time.Duration) {
	o.mu.Lock()
	o.closing.Store(true) // under mu: no socket is counted in connWG after this
	conns := make([]*nodeConn, 0, len(o.conns))
	for _, c := range o.conns {
		conns = append(conns, c)
	}
	o.mu.Unlock()
	for _, c := range conns {
		c.send(&nodeproto.Reconnect{AfterMS: rand.Int64N(nodeproto.ReconnectSpread.Milliseconds()), Reason: "replica going away"})
		c.leave(errShutdown)
	}
	done := make(chan struct{})
	go func() {
		o.connWG.Wait()
		close(done)
	}()
	t := o.cfg.Clock.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C():
	}
	o.mu.Lock()
	for _, c := range o.conns {
		c.cancel(errShutdown)
	}
	o.mu.Unlock()
	<-done
}

// serveConn makes c the node's socket on this replica and serves it until
// it ends, then gives the node's record up (if it is still c's).
func (o *Orchestrator) serveConn(ctx context.Context, c *nodeConn) error {
	id := c.rec.ID
	o.mu.Lock()
	old := o.conns[id]
	o.conns[id] = c
	closing := o.closing.Load()
	if !closing {
		o.connWG.Add(1)
		defer o.connWG.Done()
	}
	o.mu.Unlock()
	if old != nil {
		old.leave(errSuperseded)
	}
	if closing {
		// Registered while the replica began to go away: the node is told
		// to reconnect elsewhere, and the socket closes at once.
		c.send(&nodeproto.Reconnect{AfterMS: rand.Int64N(nodeproto.ReconnectSpread.Milliseconds()), Reason: "replica going away"})
		c.leave(errShutdown)
	}
	if err := o.nodeSub.Subscribe(ctx, o.keys.NodeChannel(id)); err != nil {
		c.cancel(fmt.Errorf("subscribe node channel: %w", err))
	}
	o.refreshNow()
	err := c.serve(ctx)

	o.mu.Lock()
	last := o.conns[id] == c
	if last {
		delete(o.conns, id)
	}
	o.mu.Unlock()
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if last {
		_ = o.nodeSub.Unsubscribe(bg, o.keys.NodeChannel(id))
	}
	if _, derr := o.cfg.Registry.Deregister(bg, id, c.epoch); derr != nil {
		o.cfg.Logger.Warn("node record not released", "node_id", id, "err", derr)
	}
	if o.cfg.Events != nil {
		c.mu.Lock()
		drained := c.draining
		c.mu.Unlock()
		if eerr := o.cfg.Events.Departed(bg, id, o.cfg.ID, drained && errorsIsNodeClosed(err)); eerr != nil {
			o.cfg.Logger.Warn("node departure not recorded", "node_id", id, "err", eerr)
		}
	}
	o.refreshNow()
	return err
}

// nodeDied is the registry watch's report of an expired record: a socket
// here under that epoch is dropped, and forwarded requests to it fail.
func (o *Orchestrator) nodeDied(nodeID string, epoch int64) {
	o.cfg.Metrics.deaths.Inc()
	o.mu.Lock()
	c := o.conns[nodeID]
	var lost []*reqStream
	for _, s := range o.remote {
		if s.nodeID == nodeID && s.epoch <= epoch {
			lost = append(lost, s)
		}
	}
	o.mu.Unlock()
	if c != nil && c.epoch == epoch {
		c.cancel(fmt.Errorf("%w: record of node %s expired", errLost, nodeID))
	}
	for _, s := range lost {
		s.fail(fmt.Errorf("%w: node %s stopped beating", errLost, nodeID))
	}
	o.refreshNow()
}

// recheckToken drops the connection if its token no longer verifies.
func (o *Orchestrator) recheckToken(ctx context.Context, c *nodeConn) {
	err := o.cfg.Tokens.Verify(ctx, c.rec.ID, string(c.token))
	if err != nil && isInvalidToken(err) {
		o.cfg.Logger.Warn("node token no longer valid", "node_id", c.rec.ID, "err", err)
		c.revoke()
	}
}

// revoke closes the socket with an error frame and 1008.
func (c *nodeConn) revoke() {
	c.send(&nodeproto.Error{Status: http.StatusUnauthorized, Message: "node token revoked"})
	// Give the writer a moment to send the error before the close.
	time.AfterFunc(revokeFlush, func() { c.cancel(errRevoked) })
}

// revokeFlush is how long the error frame of a revocation has to reach the
// writer before the socket closes.
const revokeFlush = 100 * time.Millisecond

// markDraining records a drain in the registry under the connection's epoch.
func (o *Orchestrator) markDraining(ctx context.Context, c *nodeConn) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if _, err := o.cfg.Registry.SetState(ctx, c.rec.ID, c.epoch, registry.StateDraining); err != nil {
		o.cfg.Logger.Warn("drain not recorded in the registry", "node_id", c.rec.ID, "err", err)
	}
	o.refreshNow()
}

// refreshNow asks for a new routing snapshot without waiting for it.
func (o *Orchestrator) refreshNow() {
	select {
	case o.refresh <- struct{}{}:
	default:
	}
}

// failRemote fails every forwarded request still waiting for replies.
func (o *Orchestrator) failRemote(err error) {
	o.mu.Lock()
	streams := make([]*reqStream, 0, len(o.remote))
	for _, s := range o.remote {
		streams = append(streams, s)
	}
	o.mu.Unlock()
	for _, s := range streams {
		s.fail(fmt.Errorf("%w: %w", errLost, err))
	}
}
