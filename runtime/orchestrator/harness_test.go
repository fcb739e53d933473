package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/controlplane"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// testModel is the platform model every test node serves.
const testModel = "llama-8b"

// cluster is a control plane under test: PostgreSQL, Redis, replicas of
// the orchestrator as separate instances, and nodes (a simulator and a
// real node agent each).
type cluster struct {
	t      testing.TB
	db     *store.DB
	rdb    *redis.Client
	reg    *registry.Registry
	tokens *admin.SQLNodeTokens
	events *orchestrator.Events
	prefix string
	dsn    string // the database's
	// adminToken opens the admin API of the gateway gatewayFor starts.
	adminToken string
	// replicas are the replicas started, for waits on their snapshots.
	replicas []*replica
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	ctx := t.Context()
	dsn := testenv.Postgres(t)
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	env := testenv.Redis(t)
	rdb := env.Client()
	reg, err := registry.New(rdb, registry.Config{Prefix: env.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, db: db, rdb: rdb, reg: reg, tokens: admin.NewSQLNodeTokens(db),
		events: orchestrator.NewEvents(db, nil), prefix: env.Prefix, dsn: dsn}
}

// dsnVia is the cluster's database reached at addr (a fault proxy).
func (c *cluster) dsnVia(addr string) string {
	c.t.Helper()
	u, err := url.Parse(c.dsn)
	if err != nil {
		c.t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// replica is one orchestrator instance behind a stable URL, so it can be
// restarted in place as a pod is.
type replica struct {
	c    *cluster
	id   string
	srv  *httptest.Server
	cur  atomic.Pointer[orchestrator.Orchestrator]
	mod  func(*orchestrator.Config)
	mu   sync.Mutex
	stop context.CancelFunc
	done chan error
}

// startReplica starts replica id; mod, if set, adjusts its config.
func (c *cluster) startReplica(id string, mod func(*orchestrator.Config)) *replica {
	c.t.Helper()
	r := &replica{c: c, id: id, mod: mod}
	c.replicas = append(c.replicas, r)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		o := r.cur.Load()
		if o == nil {
			http.Error(w, "replica restarting", http.StatusServiceUnavailable)
			return
		}
		o.Handler().ServeHTTP(w, req)
	}))
	c.t.Cleanup(func() {
		r.halt()
		r.srv.CloseClientConnections()
		r.srv.Close()
	})
	r.start()
	return r
}

// start runs a new orchestrator instance under the replica's URL, wired
// as the orchestrator command wires one (controlplane.Start): the parts
// the harness or mod leave nil are production's.
func (r *replica) start() {
	r.c.t.Helper()
	cfg := orchestrator.Config{ID: r.id, Redis: r.c.rdb, Registry: r.c.reg, Tokens: r.c.tokens,
		Events: r.c.events, ShutdownGrace: 5 * time.Second}
	if r.mod != nil {
		r.mod(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	rep, err := controlplane.Start(gctx, g, controlplane.Config{Orchestrator: cfg, DB: r.c.db, RedisPrefix: r.c.prefix})
	if err != nil {
		cancel()
		r.c.t.Fatal(err)
	}
	o := rep.Orchestrator
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	r.mu.Lock()
	r.stop, r.done = cancel, done
	r.mu.Unlock()
	r.cur.Store(o)
	select {
	case <-o.Ready():
	case err := <-done:
		r.c.t.Fatalf("replica %s stopped at start: %v", r.id, err)
	case <-time.After(testenv.WaitFor):
		r.c.t.Fatalf("replica %s not ready", r.id)
	}
}

// halt stops the running instance, as a pod that is terminated.
func (r *replica) halt() {
	r.mu.Lock()
	stop, done := r.stop, r.done
	r.stop, r.done = nil, nil
	r.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	if err := <-done; err != nil {
		r.c.t.Errorf("replica %s: %v", r.id, err)
	}
	r.cur.Store(nil)
}

// o returns the running instance.
func (r *replica) o() *orchestrator.Orchestrator { return r.cur.Load() }

// wsURL is where nodes dial this replica.
func (r *replica) wsURL() string {
	return "ws" + strings.TrimPrefix(r.srv.URL, "http") + orchestrator.ConnectPath
}

// node is one simulated engine with its node agent.
type node struct {
	id       string
	sim      *enginesim.Sim
	url      string
	tokenID  int64
	stopSim  context.CancelFunc
	stopAgt  context.CancelFunc
	agentRun chan error
	agent    *nodeagent.Agent
}

// nodeOpts configures a test node.
type nodeOpts struct {
	sim       enginesim.Config
	serverURL string // default: the replica's URL
	agent     func(*nodeagent.Config)
}

// startNode starts a simulator and an agent connected to server.
func (c *cluster) startNode(id string, server *replica, opts nodeOpts) *node {
	c.t.Helper()
	ctx := c.t.Context()
	issued, err := c.tokens.Issue(ctx, id, "issue-"+id, time.Now())
	if err != nil {
		c.t.Fatal(err)
	}
	sim, url, stopSim := c.startSim(id, opts.sim)
	n := &node{id: id, sim: sim, url: url, tokenID: issued.ID, stopSim: stopSim}
	st := sim.Stats()
	acfg := nodeagent.Config{
		ServerURL: server.wsURL(), NodeID: id, Token: nodeproto.Secret(issued.Token), EngineURL: n.url,
		Models: []nodeproto.Model{{Name: testModel, ServedName: sim.ServedModelName(), MaxNumSeqs: maxSeqs(opts.sim),
			MaxModelLen: int(sim.MaxModelLen()), KVCapacityTokens: st.KVBlocksTotal * 16}},
	}
	if opts.serverURL != "" {
		acfg.ServerURL = opts.serverURL
	}
	if opts.agent != nil {
		opts.agent(&acfg)
	}
	a, err := nodeagent.New(acfg)
	if err != nil {
		c.t.Fatal(err)
	}
	actx, stopAgt := context.WithCancel(context.Background())
	n.stopAgt, n.agent = stopAgt, a
	n.agentRun = make(chan error, 1)
	go func() { n.agentRun <- a.Run(actx) }()
	c.t.Cleanup(func() {
		stopAgt()
		select {
		case <-n.agentRun:
		case <-time.After(testenv.WaitFor):
			c.t.Errorf("agent %s did not stop", id)
		}
	})
	return n
}

// maxSeqs is the test simulators' max_num_seqs for a config.
func maxSeqs(cfg enginesim.Config) int {
	if cfg.MaxNumSeqs == 0 {
		return 64
	}
	return cfg.MaxNumSeqs
}

// startSim serves a simulator for the test, defaulted for speed; the
// returned stop ends it and waits.
func (c *cluster) startSim(name string, simCfg enginesim.Config) (*enginesim.Sim, string, func()) {
	c.t.Helper()
	if simCfg.TimeScale == 0 {
		simCfg.TimeScale = 20
	}
	if simCfg.ServedModelName == "" {
		simCfg.ServedModelName = "sim-" + name
	}
	simCfg.MaxNumSeqs = maxSeqs(simCfg)
	if simCfg.Seed == 0 {
		simCfg.Seed = 7
	}
	sim, err := enginesim.New(simCfg)
	if err != nil {
		c.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sim.Serve(ctx, ln)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	c.t.Cleanup(stop)
	return sim, "http://" + ln.Addr().String(), stop
}

// waitNode waits until the registry shows the node, owned by owner, and
// every running replica's routing snapshot holds it at that epoch, so a
// dispatch right after finds it however slow the machine is; it returns
// the node's record.
func (c *cluster) waitNode(id, owner string) registry.Node {
	c.t.Helper()
	var got registry.Node
	testenv.Eventually(c.t, fmt.Sprintf("node %s registered at %s", id, owner), func() bool {
		n, err := c.reg.Get(c.t.Context(), id)
		got = n
		return err == nil && n.Owner == owner
	})
	c.waitSnapshots(fmt.Sprintf("node %s (epoch %d)", id, got.Epoch), id, func(n registry.Node, ok bool) bool {
		return ok && n.Epoch >= got.Epoch
	})
	return got
}

// waitSnapshots waits until cond holds for node id in the routing snapshot
// of every running replica.
func (c *cluster) waitSnapshots(what, id string, cond func(n registry.Node, ok bool) bool) {
	c.t.Helper()
	testenv.Eventually(c.t, what+" in every replica's snapshot", func() bool {
		for _, r := range c.replicas {
			if o := r.o(); o != nil && !cond(o.SnapshotNode(id)) {
				return false
			}
		}
		return true
	})
}

// job returns a chat job for the test model.
func job(id string, maxTokens int64) *dispatch.Job {
	content, _ := json.Marshal("Tell me about the sea.")
	return &dispatch.Job{RequestID: id, Model: testModel, Request: &openai.ChatCompletionRequest{
		Model: testModel, Messages: []openai.Message{{Role: "user", Content: content}}, MaxTokens: &maxTokens}}
}

// result is what a consumer read from a stream.
type result struct {
	events  int
	tokens  int64 // content chunks
	usage   *openai.Usage
	errEv   *openai.Error
	err     error // the final Recv error: io.EOF when complete
	latency time.Duration
}

// drain reads a stream to its end and closes it.
func drain(st dispatch.Stream) result {
	defer st.Close()
	var r result
	for {
		ev, err := st.Recv()
		if err != nil {
			r.err = err
			return r
		}
		r.events++
		r.tokens += ev.Tokens
		if ev.Usage != nil {
			u := *ev.Usage
			r.usage = &u
		}
		if ev.Err != nil {
			e := *ev.Err
			r.errEv = &e
		}
	}
}

// complete reports whether a stream ended with [DONE] and the usage.
func (r result) complete() bool { return errors.Is(r.err, io.EOF) && r.usage != nil }
