package platformtest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/controlplane"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// readyWait bounds the wait for a new replica instance to be ready (its
// first routing refresh): a bound for a start that hangs, generous for a
// loaded machine that restarts replicas under hundreds of node agents.
const readyWait = time.Minute

// Cluster is the control plane alone, for the orchestrator's own tests:
// orchestrator replicas over one private PostgreSQL and Redis, without a
// gateway, and the nodes a test starts with StartEngine and RunAgent.
// Platform is the whole platform, built on a Cluster; both run their
// replicas and nodes with the code in this file.
type Cluster struct {
	TB testing.TB
	DB *store.DB
	// DSN is the database's address, for a test that reaches it through
	// a fault proxy.
	DSN         string
	Redis       testenv.RedisEnv
	RedisClient *redis.Client
	Registry    *registry.Registry
	// Tokens and Events work on the cluster's database, as every
	// replica's own do: a test issues node tokens and reads what the
	// replicas record through them.
	Tokens *admin.SQLNodeTokens
	Events *orchestrator.Events
	// Orchestrator is every replica's config but its ID: the parts it
	// leaves nil are built by the production wiring (controlplane.Start).
	Orchestrator orchestrator.Config
}

// NewCluster prepares a cluster on a migrated database of its own; it
// runs no replica yet.
func NewCluster(tb testing.TB) *Cluster {
	tb.Helper()
	return newCluster(tb, testenv.Postgres(tb), testenv.Redis(tb), nil)
}

// newCluster prepares a cluster on the database at dsn, which it
// migrates, and on env's Redis; its parts log to logger (nil: discard).
func newCluster(tb testing.TB, dsn string, env testenv.RedisEnv, logger *slog.Logger) *Cluster {
	tb.Helper()
	ctx := tb.Context()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	rdb := env.Client()
	reg, err := registry.New(rdb, registry.Config{Prefix: env.Prefix, Logger: logger})
	if err != nil {
		tb.Fatal(err)
	}
	c := &Cluster{TB: tb, DB: db, DSN: dsn, Redis: env, RedisClient: rdb, Registry: reg,
		Tokens: admin.NewSQLNodeTokens(db), Events: orchestrator.NewEvents(db, nil)}
	c.Orchestrator = orchestrator.Config{Redis: rdb, Registry: reg, ShutdownGrace: replicaGrace, Logger: logger}
	return c
}

// StartReplica starts replica id, which halts when the test ends; mod, if
// set, adjusts the config of each of its instances.
func (c *Cluster) StartReplica(id string, mod func(*orchestrator.Config)) *Replica {
	c.TB.Helper()
	r := c.replica(id, mod)
	c.TB.Cleanup(r.Halt)
	r.Start()
	return r
}

// replica serves replica id, wired from the cluster's config adjusted by
// mod, without starting it; the caller halts it before the test ends.
func (c *Cluster) replica(id string, mod func(*orchestrator.Config)) *Replica {
	c.TB.Helper()
	return serveReplica(c.TB, id, func() controlplane.Config {
		cfg := c.Orchestrator
		cfg.ID = id
		if mod != nil {
			mod(&cfg)
		}
		return controlplane.Config{Orchestrator: cfg, DB: c.DB, RedisPrefix: c.Redis.Prefix}
	})
}

// Replica is one orchestrator replica: instances behind a fixed address,
// as a pod is terminated and replaced while its Service keeps the
// address. It is also a dispatcher, as the local mode's gateway uses one.
type Replica struct {
	ID string
	// URL is the replica's base URL; WSURL is where nodes dial it.
	URL, WSURL string
	tb         testing.TB
	wire       func() controlplane.Config
	// serving is the instance the address and Dispatch reach: nil from
	// the moment a halt begins, as a terminating pod leaves its Service.
	serving atomic.Pointer[orchestrator.Orchestrator]
	// cur is the running instance until it has stopped.
	cur     atomic.Pointer[orchestrator.Orchestrator]
	metrics atomic.Pointer[prometheus.Gatherer]
	mu      sync.Mutex
	stop    context.CancelFunc
	done    chan error
}

// serveReplica serves replica id on loopback until the test ends; wire
// returns the wiring of each instance Start runs, called at every start
// so an instance gets parts of its own. The caller starts it, and halts
// it before the test ends.
func serveReplica(tb testing.TB, id string, wire func() controlplane.Config) *Replica {
	tb.Helper()
	r := &Replica{ID: id, tb: tb, wire: wire}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		o := r.serving.Load()
		if o == nil {
			http.Error(w, "replica restarting", http.StatusServiceUnavailable)
			return
		}
		o.Handler().ServeHTTP(w, req)
	}))
	tb.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	r.URL = srv.URL
	r.WSURL = "ws" + strings.TrimPrefix(srv.URL, "http") + orchestrator.ConnectPath
	return r
}

// Start runs a new instance under the replica's address, wired as the
// orchestrator command wires one (controlplane.Start), and waits until it
// is ready. The replica must not be running.
func (r *Replica) Start() {
	r.tb.Helper()
	if r.Orchestrator() != nil {
		r.tb.Fatalf("replica %s started while running", r.ID)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	rep, err := controlplane.Start(gctx, g, r.wire())
	if err != nil {
		cancel()
		r.tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	r.mu.Lock()
	r.stop, r.done = cancel, done
	r.mu.Unlock()
	o := rep.Orchestrator
	r.metrics.Store(&rep.Metrics)
	r.cur.Store(o)
	timeout := time.NewTimer(readyWait)
	defer timeout.Stop()
	select {
	case <-o.Ready():
	case err := <-done:
		done <- err // for Halt
		r.tb.Fatalf("replica %s stopped at start: %v", r.ID, err)
	case <-timeout.C:
		r.tb.Fatalf("replica %s not ready within %v", r.ID, readyWait)
	}
	r.serving.Store(o)
}

// Halt stops the running instance as a terminated pod does: its address
// refuses at once, and Halt returns when the instance has stopped (within
// its ShutdownGrace). Halting a halted replica does nothing.
func (r *Replica) Halt() {
	r.mu.Lock()
	stop, done := r.stop, r.done
	r.stop, r.done = nil, nil
	r.mu.Unlock()
	if stop == nil {
		return
	}
	r.serving.Store(nil)
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		r.tb.Errorf("replica %s: %v", r.ID, err)
	}
	r.cur.Store(nil)
}

// Orchestrator is the replica's running instance, also while it halts;
// nil once it has stopped.
func (r *Replica) Orchestrator() *orchestrator.Orchestrator { return r.cur.Load() }

// Dispatch implements dispatch.Dispatcher through the serving instance;
// while the replica halts or restarts there is no capacity, and a gateway
// queues.
func (r *Replica) Dispatch(ctx context.Context, job *dispatch.Job) (dispatch.Stream, error) {
	o := r.serving.Load()
	if o == nil {
		return nil, dispatch.ErrNoCapacity
	}
	return o.Dispatch(ctx, job)
}

// Counter sums the latest instance's counter name over its labels (0
// when it has none yet).
func (r *Replica) Counter(name string) float64 {
	r.tb.Helper()
	families, err := (*r.metrics.Load()).Gather()
	if err != nil {
		r.tb.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// Gauge is the latest instance's gauge name where its label has value
// (0 when it has none yet).
func (r *Replica) Gauge(name, label, value string) float64 {
	r.tb.Helper()
	families, err := (*r.metrics.Load()).Gather()
	if err != nil {
		r.tb.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// Engine is a simulated engine served on loopback.
type Engine struct {
	*enginesim.Sim
	// URL is the engine's base URL.
	URL  string
	stop func()
}

// StartEngine serves a simulator configured by cfg until the test ends.
func StartEngine(tb testing.TB, cfg enginesim.Config) *Engine {
	tb.Helper()
	sim, err := enginesim.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sim.Serve(ctx, ln)
	}()
	e := &Engine{Sim: sim, URL: "http://" + ln.Addr().String(), stop: sync.OnceFunc(func() { cancel(); <-done })}
	tb.Cleanup(e.stop)
	return e
}

// Stop ends the engine and waits for it, as an engine process that dies.
func (e *Engine) Stop() { e.stop() }

// AgentConfig is the config of a node agent that dials serverURL as node
// id with token and serves model on sim, reached at engineURL, with room
// for the simulator's MaxNumSeqs streams.
func AgentConfig(serverURL, id, token, model string, sim *enginesim.Sim, engineURL string) nodeagent.Config {
	st := sim.Stats()
	return nodeagent.Config{ServerURL: serverURL, NodeID: id, Token: nodeproto.Secret(token), EngineURL: engineURL,
		Models: []nodeproto.Model{{Name: model, ServedName: sim.ServedModelName(), MaxNumSeqs: sim.MaxNumSeqs(),
			MaxModelLen: int(sim.MaxModelLen()), KVCapacityTokens: st.KVBlocksTotal * capacity.DefaultBlockSize}}}
}

// Agent is a node agent running in the test process.
type Agent struct {
	*nodeagent.Agent
	stop context.CancelFunc
	done chan struct{}
	err  error // Run's, set before done closes
}

// RunAgent runs a node agent configured by cfg until the test ends; an
// error its Run returns fails the test then.
func RunAgent(tb testing.TB, cfg nodeagent.Config) *Agent {
	tb.Helper()
	na, err := nodeagent.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{Agent: na, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.err = na.Run(ctx)
	}()
	tb.Cleanup(func() {
		a.stop()
		select {
		case <-a.done:
		case <-time.After(testenv.WaitFor):
			tb.Errorf("agent %s did not stop", cfg.NodeID)
			return
		}
		if a.err != nil {
			tb.Errorf("agent %s: %v", cfg.NodeID, a.err)
		}
	})
	return a
}

// Done is closed when the agent's Run has returned, as it does when the
// node drains; Err is then what it returned.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Err is what the agent's Run returned, once Done is closed.
func (a *Agent) Err() error {
	select {
	case <-a.done:
		return a.err
	default:
		return nil
	}
}
