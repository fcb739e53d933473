// Package platformtest runs the whole platform inside one test process,
// on the private PostgreSQL and Redis the test harness starts: an
// orchestrator replica, a gateway that dispatches to it in process (as the
// local mode does), and nodes — simulated engines whose agents dial the
// orchestrator's socket over loopback. Benchmarks and the chaos suite build
// on it; it is for tests only.
package platformtest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/frontdoor"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
	"github.com/llmplat/llmplat/runtime/urlguard"
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
}

// Platform is a running platform. Its parts stop when the test ends.
type Platform struct {
	tb           testing.TB
	DB           *store.DB
	Redis        testenv.RedisEnv
	Registry     *registry.Registry
	Orchestrator *orchestrator.Orchestrator
	Ledger       *ledger.Ledger
	Admin        *admin.SQLStore
	tokens       *admin.SQLNodeTokens
	// URL is the gateway's base URL; WSURL the orchestrator's node socket.
	URL, WSURL string
	// PostgresProxy and RedisProxy stand between every part and the
	// servers when Options.Proxied is set.
	PostgresProxy, RedisProxy *testenv.FaultProxy
	wsAddr                    string // the orchestrator's host:port
	logger                    *slog.Logger
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
	db, err := store.Open(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	// Registered after the servers and their proxies, so it runs before
	// they stop: the platform shuts down while it can still reach them.
	tb.Cleanup(func() {
		cancel()
		if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			tb.Errorf("platform: %v", err)
		}
	})
	if err := db.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	p := &Platform{tb: tb, DB: db, Redis: redisEnv, Admin: admin.NewSQLStore(db), tokens: admin.NewSQLNodeTokens(db),
		PostgresProxy: pgProxy, RedisProxy: redisProxy, logger: logger}
	rdb := p.Redis.Client()
	if p.Registry, err = registry.New(rdb, registry.Config{Prefix: p.Redis.Prefix, Logger: logger}); err != nil {
		tb.Fatal(err)
	}
	if p.Orchestrator, err = orchestrator.New(orchestrator.Config{ID: "orch-1", Redis: rdb, Registry: p.Registry, Tokens: p.tokens,
		Events: orchestrator.NewEvents(db, nil), ShutdownGrace: 2 * time.Second, Logger: logger,
		CloudNodes: opts.Cloud, CloudClient: opts.CloudClient}); err != nil {
		tb.Fatal(err)
	}
	g.Go(func() error { return p.Orchestrator.Run(gctx) })
	p.wsAddr = Serve(tb, p.Orchestrator.Handler())[len("http://"):]
	p.WSURL = "ws://" + p.wsAddr + orchestrator.ConnectPath
	if p.Ledger, err = ledger.New(db, ledger.Config{Completions: orchestrator.NewCompletionLog(rdb, p.Redis.Prefix), Logger: logger}); err != nil {
		tb.Fatal(err)
	}
	g.Go(func() error { return p.Ledger.Run(gctx) })
	front, err := frontdoor.Start(gctx, g, frontdoor.Config{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", DB: db,
		Redis: rdb, RedisPrefix: p.Redis.Prefix, Ledger: p.Ledger, Dispatcher: p.Orchestrator,
		URLGuard: &urlguard.Guard{AllowUnresolvable: true}, StreamIdleTimeout: opts.StreamIdleTimeout,
		FirstTokenTimeout: opts.FirstTokenTimeout, RedisTimeout: opts.RedisTimeout, Logger: logger})
	if err != nil {
		tb.Fatal(err)
	}
	p.URL = front.Base
	return p
}

// Model registers the platform model name, served by engines as served,
// at the package's prices.
func (p *Platform) Model(name, served string) {
	p.tb.Helper()
	if _, _, err := p.Admin.PutModel(context.Background(), name, admin.ModelSpec{ServedName: served,
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
func (p *Platform) Key(req admin.CreateKeyRequest) string {
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
func (p *Platform) WaitNode(id string) { p.tb.Helper(); p.WaitRegistered(id, 0, 30*time.Second) }

// WaitRegistered waits up to within until node id holds a registration
// newer than epoch (0: any), and returns its epoch.
func (p *Platform) WaitRegistered(id string, epoch int64, within time.Duration) int64 {
	p.tb.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		if n, err := p.Registry.Get(context.Background(), id); err == nil && n.Owner != "" && n.Epoch > epoch {
			return n.Epoch
		}
		if time.Now().After(deadline) {
			p.tb.Fatalf("node %s did not register (after epoch %d) within %v", id, epoch, within)
		}
	}
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
// streams, and waits until the orchestrator has it. Both stop when the
// test ends.
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
	st := sim.Stats()
	serverURL := p.WSURL
	if link != nil {
		serverURL = "ws://" + link.Addr() + orchestrator.ConnectPath
	}
	agent, err := nodeagent.New(nodeagent.Config{ServerURL: serverURL, NodeID: id, Token: nodeproto.Secret(p.NodeToken(id)),
		EngineURL: url, Logger: p.logger,
		Models: []nodeproto.Model{{Name: model, ServedName: sim.ServedModelName(), MaxNumSeqs: maxNumSeqs,
			MaxModelLen: int(sim.MaxModelLen()), KVCapacityTokens: st.KVBlocksTotal * 16}}})
	if err != nil {
		p.tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	p.tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			p.tb.Errorf("agent %s: %v", id, err)
		}
	})
	p.WaitNode(id)
	return &Node{ID: id, Sim: sim, URL: url}
}

// ServeSim runs a simulator configured by cfg on loopback until the test
// ends and returns it with its base URL.
func ServeSim(tb testing.TB, cfg enginesim.Config) (*enginesim.Sim, string) {
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
	tb.Cleanup(func() { cancel(); <-done })
	return sim, "http://" + ln.Addr().String()
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
