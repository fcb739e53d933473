package devmode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/console"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/frontdoor"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

// redisPrefix namespaces the local mode's keys.
const redisPrefix = "llmplat:"

// Defaults of the local mode.
const (
	// DefaultAddr is where the gateway listens: loopback only, since the
	// local mode has no TLS.
	DefaultAddr = "127.0.0.1:8080"
	// DefaultMetricsAddr serves Prometheus metrics on their own port, as in
	// production, so that scraping never shares the API's listener.
	DefaultMetricsAddr = "127.0.0.1:9464"
	// readyTimeout bounds the wait for every part to answer before the
	// credentials are printed.
	readyTimeout = 30 * time.Second
)

// nodeSocketLine starts the printed line that gives the node socket's URL.
const nodeSocketLine = "node agents connect to "

// consoleLine starts the printed line that gives the web console's URL.
const consoleLine = "console: "

// DefaultModels are the reference workload's three models, by the names clients use.
var DefaultModels = []string{"llama-8b", "qwen-32b", "llama-70b"}

// Config is the local mode's configuration; the zero value is usable.
type Config struct {
	// Addr is the gateway's listen address; empty means DefaultAddr.
	Addr string
	// NodeAddr is where the orchestrator's node socket listens, for the
	// local node agents and any node added by hand; empty means a free
	// loopback port. Its URL is printed when the platform is ready.
	NodeAddr string
	// MetricsAddr is where /metrics is served, apart from the API; empty
	// means DefaultMetricsAddr.
	MetricsAddr string
	// DataDir holds the SQLite database and the secrets the local mode
	// minted (secretsFile), so that a restart on it prints the same
	// credentials; empty means a temporary directory removed at exit, so
	// every run starts clean.
	DataDir string
	// Models are the simulator profiles to run; nil means DefaultModels.
	Models []string
	// TimeScale speeds up the simulated engines; zero means real time.
	TimeScale float64
	// Stdout receives the lines a user pastes into a shell.
	Stdout io.Writer
	// Logger receives operational logs; nil means discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.NodeAddr == "" {
		c.NodeAddr = "127.0.0.1:0"
	}
	if c.MetricsAddr == "" {
		c.MetricsAddr = DefaultMetricsAddr
	}
	if c.Models == nil {
		c.Models = DefaultModels
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Run starts the local platform and serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	dataDir, cleanup, err := dataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer cleanup()
	sec, err := loadSecrets(dataDir)
	if err != nil {
		return err
	}

	// Redis and the store close last, after every part that uses them:
	// deferred calls run in reverse, so the group is stopped and waited
	// for first — on the way out after a failed start too, which would
	// otherwise wait for a cancellation that never comes.
	redisAddr, stopRedis, err := startRedis()
	if err != nil {
		return err
	}
	defer stopRedis()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	db, err := store.Open(ctx, "sqlite:"+filepath.Join(dataDir, "llmplat.db"))
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate store: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	g, ctx := errgroup.WithContext(ctx)
	defer func() {
		cancel()
		_ = g.Wait()
	}()
	led, err := frontdoor.NewLedger(db, rdb, redisPrefix, cfg.Logger)
	if err != nil {
		return err
	}
	g.Go(func() error { return led.Run(ctx) })

	engines := map[string]engine{}
	maxLens := map[string]int64{}
	for _, name := range cfg.Models {
		eng, err := startEngine(ctx, g, name, cfg.TimeScale)
		if err != nil {
			return err
		}
		engines[name] = eng
		maxLens[name] = eng.maxModelLen
		cfg.Logger.Info("engine started", "model", name, "url", eng.url)
	}
	if err := waitEngines(ctx, engines); err != nil {
		return err
	}
	// One registry: the local mode's /metrics shows the gateway's and the
	// orchestrator's metrics (the nodes, the pending gauge) together.
	metrics := prometheus.NewRegistry()
	orch, nodeURL, err := startControlPlane(ctx, g, db, rdb, cfg.NodeAddr, sec, engines, metrics, cfg.Logger)
	if err != nil {
		return err
	}
	cred, err := bootstrap(ctx, admin.NewSQLStore(db), led, sec, maxLens)
	if err != nil {
		return err
	}
	adminToken := sec.AdminToken
	front, err := frontdoor.Start(ctx, g, frontdoor.Config{
		Addr: cfg.Addr, MetricsAddr: cfg.MetricsAddr, DB: db, Redis: rdb, RedisPrefix: redisPrefix,
		Ledger: led, Dispatcher: orch, AdminToken: adminToken,
		// The local mode has no DNS to ask: a name that cannot be resolved
		// is let through; internal addresses are still refused.
		URLGuard: &urlguard.Guard{AllowUnresolvable: true},
		// Nothing wakes a model in the local mode but a node someone
		// starts: its callers hear so at once, and why, rather than wait
		// for a wake that is not coming.
		Unserved: unserved{nodes: admin.NewSQLStore(db), logger: cfg.Logger},
		Metrics:  metrics,
		Logger:   cfg.Logger,
	})
	if err != nil {
		return err
	}
	if err := waitHealthy(ctx, front.Base+"/healthz"); err != nil {
		return err
	}
	fmt.Fprintf(cfg.Stdout, "llmplat dev: ready — models %v on %d nodes (GET /admin/nodes), metrics %s/metrics, data %s\n\n",
		cfg.Models, len(engines), front.Metrics, dataDir)
	fmt.Fprintf(cfg.Stdout, "OPENAI_BASE_URL=%s/v1\nOPENAI_API_KEY=%s\n\n", front.Base, cred.key)
	fmt.Fprintf(cfg.Stdout, "LLMPLAT_ADMIN_TOKEN=%s\n\n", adminToken)
	fmt.Fprintf(cfg.Stdout, "%s%s%s (sign in with the key or the admin token above)\n", consoleLine, front.Base, console.Path)
	fmt.Fprintf(cfg.Stdout, "%s%s (llmplat nodeagent -server; a token from POST /admin/nodes/{id}/tokens)\n",
		nodeSocketLine, nodeURL)
	fmt.Fprintf(cfg.Stdout, "team %q has %d credits (1 credit = 1 USD at the models' prices); stop with Ctrl-C\n", cred.team, cred.credits)
	if cfg.DataDir == "" {
		fmt.Fprintf(cfg.Stdout, "the key, the token and the data live in a temporary folder removed at exit; -data-dir keeps them across restarts\n")
	}
	return g.Wait()
}

func dataDir(dir string) (string, func(), error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", nil, fmt.Errorf("data dir: %w", err)
		}
		return dir, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "llmplat-dev-")
	if err != nil {
		return "", nil, fmt.Errorf("data dir: %w", err)
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// engine is one running simulated engine.
type engine struct {
	url         string
	maxModelLen int64
	maxNumSeqs  int
	kvTokens    int64
}

// startEngine runs one simulated engine on a loopback port.
func startEngine(ctx context.Context, g *errgroup.Group, profile string, timeScale float64) (engine, error) {
	dep, err := enginesim.Profile(profile)
	if err != nil {
		return engine{}, err
	}
	cfg := enginesim.Config{Deployment: dep, ServedModelName: profile, TimeScale: timeScale, MaxNumSeqs: enginesim.DefaultMaxNumSeqs}
	sim, err := enginesim.New(cfg)
	if err != nil {
		return engine{}, fmt.Errorf("engine %s: %w", profile, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return engine{}, fmt.Errorf("engine %s listen: %w", profile, err)
	}
	g.Go(func() error { return sim.Serve(ctx, ln) })
	return engine{url: "http://" + ln.Addr().String(), maxModelLen: sim.MaxModelLen(), maxNumSeqs: cfg.MaxNumSeqs,
		kvTokens: sim.Stats().KVBlocksTotal * int64(dep.BlockSize)}, nil
}

// waitEngines polls every engine's /health until all answer.
func waitEngines(ctx context.Context, engines map[string]engine) error {
	urls := make([]string, 0, len(engines))
	for _, e := range engines {
		urls = append(urls, e.url+"/health")
	}
	return waitHealthy(ctx, urls...)
}

// waitHealthy polls the URLs until each answers 200.
func waitHealthy(ctx context.Context, urls ...string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for _, u := range urls {
		for {
			if ok(ctx, u) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("not ready: %s: %w", u, errors.Join(ctx.Err(), context.Cause(ctx)))
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

func ok(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
