// Package platformtest runs the whole platform inside one test process,
// on the private PostgreSQL and Redis the test harness starts: an
// orchestrator replica, a gateway that dispatches to it in process (as the
// local mode does), and nodes — simulated engines whose agents dial the
// orchestrator's socket over loopback. Benchmarks, the chaos suite and the
// gateway's black-box tests build on it; it is for tests only. A test
// changes a part one way: Options.Orchestrator and Options.Gateway adjust a
// replica's or a gateway's config last, so a part left alone is
// production's and a part set there replaces or wraps it.
package platformtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/coldstart"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/frontdoor"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/routing"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// Prices every model Start registers carries, in micro-credits per million
// tokens: 0.1 and 0.5 USD per million prompt and completion tokens.
const (
	PromptPrice     = 100_000
	CompletionPrice = 500_000
)

// Options shape a platform; the zero value is production's defaults.
type Options struct {
	// Durable runs the ledger on a PostgreSQL that syncs every commit to
	// disk (testenv.DurablePostgres).
	Durable bool
	// StreamIdleTimeout, FirstTokenTimeout and RedisTimeout are the
	// gateway's (zero: its defaults).
	StreamIdleTimeout, FirstTokenTimeout, RedisTimeout time.Duration
	// Cloud are engines the orchestrator reaches over HTTP, as on EKS;
	// CloudClient is its client for them (nil: its own).
	Cloud       []orchestrator.CloudNode
	CloudClient *http.Client
	// Logger receives every part's logs; nil discards them.
	Logger *slog.Logger
	// Proxied puts PostgreSQL and Redis behind fault proxies (the
	// Platform's PostgresProxy and RedisProxy) that a test can cut.
	Proxied bool
	// QueueLimit is the gateway's longest wait for an engine (zero: its
	// default).
	QueueLimit time.Duration
	// WakeHold is the gateway's hold of a caller of a model at zero (zero:
	// its default; negative: answered at once).
	WakeHold time.Duration
	// Replicas is how many orchestrator replicas run (zero: one). The
	// gateway dispatches through the first, as the local mode does; the
	// others reach nodes through it over Redis.
	Replicas int
	// RegistrationsPerSecond is the replicas' cluster-wide registration
	// rate (zero: the orchestrator's default).
	RegistrationsPerSecond int
	// Policy names the replicas' routing policy (empty: the default,
	// routing.KVAware).
	Policy string
	// AdminToken, when set, is accepted as the admin credential, as the
	// local mode's printed token is.
	AdminToken string
	// ProxyProtocolFrom are the addresses the gateways read PROXY headers
	// from (frontdoor.Config.ProxyProtocolFrom); empty reads none.
	ProxyProtocolFrom []netip.Prefix
	// Orchestrator, when set, adjusts each replica instance's config
	// before it starts (replica id in cfg.ID): a part left nil is built
	// by the production wiring, a part set here replaces or wraps it.
	Orchestrator func(cfg *orchestrator.Config)
	// Gateway, when set, adjusts each gateway's config last, before it is
	// built (frontdoor.Config.Gateway): a part left as it is is
	// production's, a part set here replaces or wraps it (the ledger, the
	// limiter, a timeout).
	Gateway func(cfg *gateway.Config)
	// Engines, when set, makes the gateways dispatch straight to these
	// engines, as a gateway started with -engine does, instead of through
	// the first orchestrator replica; then no replica runs (Replicas,
	// Cloud and the node methods do not apply).
	Engines map[string][]engineclient.Target
}

// replicaGrace is the replicas' shutdown grace: a test's platform stops
// at its end, with no stream worth 30 s of waiting.
const replicaGrace = 2 * time.Second

// Platform is a running platform. Its parts stop when the test ends.
type Platform struct {
	tb       testing.TB
	DB       *store.DB
	Redis    testenv.RedisEnv
	Registry *registry.Registry
	// Replicas are the orchestrator replicas; RestartOrchestrators
	// replaces their instances.
	Replicas []*Replica
	Ledger   *ledger.Ledger
	Admin    *admin.SQLStore
	tokens   *admin.SQLNodeTokens
	// URL is the gateway's base URL; WSURL the first replica's node
	// socket.
	URL, WSURL string
	// DSN is the database URL every part uses (through PostgresProxy when
	// Options.Proxied is set).
	DSN string
	// PostgresProxy and RedisProxy stand between every part and the
	// servers when Options.Proxied is set.
	PostgresProxy, RedisProxy *testenv.FaultProxy
	redisDirect               testenv.RedisEnv // the server itself, not through RedisProxy
	wsAddr                    string           // the first replica's host:port
	logger                    *slog.Logger
	cluster                   *Cluster // the replicas' control plane
	coldStarts                *coldstart.Board
	opts                      Options
	// Gateways are the running gateways, the first serving URL
	// (StartGateway adds more).
	Gateways []*gateway.Server
}

// Start runs a platform until the test ends.
func Start(tb testing.TB, opts Options) *Platform {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dsn := ""
	if opts.Durable {
		dsn = testenv.DurablePostgres(tb)
	} else {
		dsn = testenv.Postgres(tb)
	}
	redisEnv := testenv.Redis(tb)
	redisDirect := redisEnv
	var pgProxy, redisProxy *testenv.FaultProxy
	if opts.Proxied {
		u, err := url.Parse(dsn)
		if err != nil {
			tb.Fatal(err)
		}
		pgProxy = testenv.NewFaultProxy(tb, u.Host)
		u.Host = pgProxy.Addr()
		dsn = u.String()
		redisProxy = testenv.NewFaultProxy(tb, redisEnv.Addr)
		ru, err := url.Parse(redisEnv.URL)
		if err != nil {
			tb.Fatal(err)
		}
		ru.Host = redisProxy.Addr()
		redisEnv.Addr, redisEnv.URL = redisProxy.Addr(), ru.String()
	}
	// The control plane the replicas run on, each wired as the
	// orchestrator command wires one (controlplane.Start); a test's
	// Orchestrator hook adjusts or wraps its parts.
	c := newCluster(tb, dsn, redisEnv, logger)
	c.Orchestrator.CloudNodes, c.Orchestrator.CloudClient = opts.Cloud, opts.CloudClient
	c.Orchestrator.RegistrationsPerSecond = opts.RegistrationsPerSecond
	db, rdb := c.DB, c.RedisClient
	p := &Platform{tb: tb, DB: db, Redis: redisEnv, redisDirect: redisDirect, Registry: c.Registry, Admin: admin.NewSQLStore(db),
		tokens: c.Tokens, PostgresProxy: pgProxy, RedisProxy: redisProxy, logger: logger, cluster: c, opts: opts, DSN: dsn}
	// Registered after the servers and their proxies, so it runs before
	// they stop: the platform shuts down while it can still reach them.
	tb.Cleanup(func() {
		cancel()
		p.haltReplicas()
		if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			tb.Errorf("platform: %v", err)
		}
	})
	var err error
	if p.coldStarts, err = coldstart.New(rdb, p.Redis.Prefix, nil); err != nil {
		tb.Fatal(err)
	}
	// A gateway that dispatches straight to engines has no orchestrator
	// (one would publish its models at zero, having no node of them).
	if opts.Engines == nil {
		for i := range max(opts.Replicas, 1) {
			p.Replicas = append(p.Replicas, p.startReplica(fmt.Sprintf("orch-%d", i+1)))
		}
		p.WSURL = p.Replicas[0].WSURL
		p.wsAddr = strings.TrimSuffix(strings.TrimPrefix(p.WSURL, "ws://"), orchestrator.ConnectPath)
	}
	if p.Ledger, err = frontdoor.NewLedger(db, rdb, p.Redis.Prefix, logger); err != nil {
		tb.Fatal(err)
	}
	g.Go(func() error { return p.Ledger.Run(gctx) })
	p.URL = p.startFront(gctx, g, rdb)
	return p
}

// Model registers the platform model name, served by engines as served,
// at the package's prices.
func (p *Platform) Model(name, served string) {
	p.tb.Helper()
	if _, _, err := p.Admin.PutModel(context.Background(), name, adminwire.ModelSpec{ServedName: served,
		PromptPriceMicroPerMTok: PromptPrice, CompletionPriceMicroPerMTok: CompletionPrice,
		MaxContextTokens: 8192, MaxOutputTokens: 4096}, time.Now()); err != nil {
		p.tb.Fatal(err)
	}
}

// Team creates a team granted credit micro-credits and returns its id.
func (p *Platform) Team(name string, credit int64) int64 {
	p.tb.Helper()
	ctx := context.Background()
	team, _, err := p.Admin.CreateTeam(ctx, name, time.Now())
	if err != nil {
		p.tb.Fatal(err)
	}
	if credit > 0 {
		if _, err := p.Ledger.AddCredit(ctx, team.ID, "grant-"+name, credit, "test"); err != nil {
			p.tb.Fatal(err)
		}
	}
	return team.ID
}

// Key creates an API key as req asks and returns its secret.
func (p *Platform) Key(req adminwire.CreateKeyRequest) string {
	p.tb.Helper()
	key, err := p.Admin.CreateKey(context.Background(), req, "", time.Now())
	if err != nil {
		p.tb.Fatal(err)
	}
	return key.Secret
}

// NodeToken issues node id's token.
func (p *Platform) NodeToken(id string) string {
	p.tb.Helper()
	issued, err := p.tokens.Issue(context.Background(), id, id, time.Now())
	if err != nil {
		p.tb.Fatal(err)
	}
	return issued.Token
}

// WaitNode waits until node id is registered with the orchestrator.
func (p *Platform) WaitNode(id string) { p.tb.Helper(); p.WaitRegistered(id, 0, registerWait) }

// registerWait bounds the wait for a new node's registration and its wake
// record: an agent's dial, its token check and a refresh, on a loaded
// machine that runs hundreds of streams beside them.
const registerWait = 30 * time.Second

// WaitRegistered waits up to within until node id holds a registration
// newer than epoch (0: any), and returns its epoch.
func (p *Platform) WaitRegistered(id string, epoch int64, within time.Duration) int64 {
	p.tb.Helper()
	var got int64
	testenv.EventuallyWithin(p.tb, within, fmt.Sprintf("node %s to register after epoch %d", id, epoch), func() bool {
		n, err := p.Registry.Get(context.Background(), id)
		got = n.Epoch
		return err == nil && n.Owner != "" && n.Epoch > epoch
	})
	return got
}

// waitNotAtZero waits until the orchestrators no longer publish model at
// zero: a node's registration reaches the wake record a refresh after the
// registry, and a request sent in between would be refused as a cold
// start's.
func (p *Platform) waitNotAtZero(model string) {
	p.tb.Helper()
	testenv.EventuallyWithin(p.tb, registerWait, "model "+model+" no longer at zero after its node registered", func() bool {
		zero, err := p.coldStarts.AtZero(context.Background(), model)
		return err == nil && !zero
	})
}

// Node is a simulated engine with its node agent, in this process.
type Node struct {
	ID  string
	Sim *enginesim.Sim
	// URL is the engine's base URL.
	URL string
}

// StartNode runs a simulated engine configured by cfg and its agent,
// which registers as node id serving model with room for maxNumSeqs
// streams, and waits until the orchestrator has it and — unless cfg has
// the engine load first — its model is no longer at zero. Both stop when
// the test ends.
func (p *Platform) StartNode(id, model string, cfg enginesim.Config, maxNumSeqs int) *Node {
	p.tb.Helper()
	return p.StartNodeVia(nil, id, model, cfg, maxNumSeqs)
}

// StartNodeVia is StartNode for a node whose socket to the orchestrator
// goes through link (nil: straight).
func (p *Platform) StartNodeVia(link *testenv.FaultProxy, id, model string, cfg enginesim.Config, maxNumSeqs int) *Node {
	p.tb.Helper()
	cfg.MaxNumSeqs = maxNumSeqs
	sim, url := ServeSim(p.tb, cfg)
	serverURL := p.WSURL
	if link != nil {
		serverURL = LinkURL(link)
	}
	p.StartAgent(serverURL, id, model, sim, url)
	p.WaitNode(id)
	if cfg.LoadTime == 0 {
		// A node whose engine is still loading leaves its model at zero
		// from its first heartbeat on, which is what a test of a wake
		// observes; only a node that serves at once ends it.
		p.waitNotAtZero(model)
	}
	return &Node{ID: id, Sim: sim, URL: url}
}

// LinkURL is the node socket's URL through link, a fault proxy in front of
// a replica (NodeLink).
func LinkURL(link *testenv.FaultProxy) string {
	return "ws://" + link.Addr() + orchestrator.ConnectPath
}

// StartAgent runs a node agent that dials serverURL and registers as node
// id, serving model on sim (at engineURL) with room for the simulator's
// MaxNumSeqs streams. It does not wait for the registration. The agent
// stops when the test ends.
func (p *Platform) StartAgent(serverURL, id, model string, sim *enginesim.Sim, engineURL string) *nodeagent.Agent {
	p.tb.Helper()
	cfg := AgentConfig(serverURL, id, p.NodeToken(id), model, sim, engineURL)
	cfg.Logger = p.logger
	return RunAgent(p.tb, cfg).Agent
}

// ServeSim runs a simulator configured by cfg on loopback until the test
// ends and returns it with its base URL.
func ServeSim(tb testing.TB, cfg enginesim.Config) (*enginesim.Sim, string) {
	tb.Helper()
	e := StartEngine(tb, cfg)
	return e.Sim, e.URL
}

// Serve serves h on loopback until the test ends and returns its base URL.
func Serve(tb testing.TB, h http.Handler) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		srv.Close()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// LoseRedisData deletes everything the platform keeps in Redis, as a
// restart of a Redis without persistence does: node records, stream
// slots, counters, queues, the settle log.
func (p *Platform) LoseRedisData() {
	p.tb.Helper()
	ctx := context.Background()
	rdb := p.redisDirect.Client()
	iter := rdb.Scan(ctx, 0, p.redisDirect.Prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			p.tb.Fatal(err)
		}
	}
	if err := iter.Err(); err != nil {
		p.tb.Fatal(err)
	}
}

// CheckBooks audits the ledger (ledger.Audit).
func (p *Platform) CheckBooks(ctx context.Context) (ledger.Books, error) { return p.Ledger.Audit(ctx) }

// Discard reads and closes resp's body, so its connection can be reused.
func Discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// NodeLink is a fault proxy in front of the orchestrator's node socket,
// for StartNodeVia: a network path between a node and the platform that a
// test can cut or freeze.
func (p *Platform) NodeLink() *testenv.FaultProxy { return testenv.NewFaultProxy(p.tb, p.wsAddr) }

// startReplica starts replica id of the platform's cluster, with
// Options.Policy and then Options.Orchestrator applied to each instance's
// config; the platform halts it when the test ends.
func (p *Platform) startReplica(id string) *Replica {
	p.tb.Helper()
	r := p.cluster.replica(id, func(cfg *orchestrator.Config) {
		if p.opts.Policy != "" {
			var err error
			if cfg.Policy, err = routing.New(p.opts.Policy); err != nil {
				p.tb.Fatal(err)
			}
		}
		if p.opts.Orchestrator != nil {
			p.opts.Orchestrator(cfg)
		}
	})
	r.Start()
	return r
}

// Orchestrator is the first replica's running instance.
func (p *Platform) Orchestrator() *orchestrator.Orchestrator { return p.Replicas[0].Orchestrator() }

// RestartOrchestrators stops every replica at once, as a rollout gone wrong
// or a cluster restart does, then starts each again under its address.
func (p *Platform) RestartOrchestrators() {
	p.tb.Helper()
	p.haltReplicas()
	for _, r := range p.Replicas {
		r.Start()
	}
}

// haltReplicas stops every replica's instance at once.
func (p *Platform) haltReplicas() {
	var wg sync.WaitGroup
	for _, r := range p.Replicas {
		wg.Go(r.Halt)
	}
	wg.Wait()
}
