package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/coldstart"
	"github.com/llmplat/llmplat/runtime/console"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/httpserve"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/proxyheader"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/settlelog"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

// Config is what a front door needs.
type Config struct {
	// Addr and MetricsAddr are the API's and the metrics' listen addresses.
	Addr, MetricsAddr string
	// TLSCertFile and TLSKeyFile turn on TLS at the edge.
	TLSCertFile, TLSKeyFile string
	// ProxyProtocolFrom are the load balancer's addresses (its subnets):
	// connections from them may open with a PROXY protocol header naming
	// the client, and one from anywhere else that does is refused
	// (package proxyheader). Empty reads no header.
	ProxyProtocolFrom []netip.Prefix
	DB                *store.DB
	Redis             redis.UniversalClient
	// RedisPrefix namespaces every Redis key, so deployments can share one.
	RedisPrefix string
	Ledger      *ledger.Ledger
	Dispatcher  dispatch.Dispatcher
	// AdminToken, when set, is a bootstrap credential with the admin role.
	AdminToken string
	// JWT, when set, accepts JWTs verified against a JWKS URL.
	JWT *auth.JWTConfig
	// URLGuard refuses internal URLs in bodies; nil means the default.
	URLGuard          *urlguard.Guard
	QueueLimit        time.Duration
	FirstTokenTimeout time.Duration
	StreamIdleTimeout time.Duration
	// WakeHold is how long a caller of a model at zero is held for its
	// wake (zero: the gateway's default; negative: answered at once).
	WakeHold time.Duration
	// Unserved, when set, means nothing in this deployment starts a replica
	// of a model at zero (the local mode): its callers are told at once
	// why no node serves it (gateway.Config.Unserved).
	Unserved gateway.Unserved
	// RedisTimeout bounds each Redis call on a request's path (zero: the
	// gateway's default).
	RedisTimeout time.Duration
	// DrainDelay is how long the gateway serves on with /healthz failed
	// once ctx ends, before it shuts down (gateway.Config.DrainDelay);
	// /metrics is served until the gateway's shutdown ends.
	DrainDelay time.Duration
	// Metrics is the registry the front door's metrics join and its
	// /metrics serves; nil means one of its own. The local mode shares one
	// with its orchestrator, so its one /metrics shows both.
	Metrics *prometheus.Registry
	Logger  *slog.Logger
	// Gateway, when set, adjusts the gateway's config last, before it is
	// built: a part left as it is is production's, a part set there
	// replaces or wraps it (tests wrap the ledger or the limiter).
	Gateway func(*gateway.Config)
}

// Front is a running front door.
type Front struct {
	// Base and Metrics are the URLs the API and /metrics answer on.
	Base, Metrics string
	// Server is the gateway serving Base.
	Server *gateway.Server
}

// Start builds the front door and runs its parts in g until ctx ends.
func Start(ctx context.Context, g *errgroup.Group, cfg Config) (Front, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	adm := admin.NewSQLStore(cfg.DB)
	keys, err := auth.NewKeyCache(auth.KeyCacheConfig{Store: adm, Redis: cfg.Redis, Prefix: cfg.RedisPrefix, Logger: cfg.Logger})
	if err != nil {
		return Front{}, err
	}
	g.Go(func() error { return keys.Run(ctx) })
	authn := &auth.Authenticator{Keys: keys}
	if cfg.AdminToken != "" {
		if authn.Admin, err = auth.NewStaticAdminToken(cfg.AdminToken); err != nil {
			return Front{}, err
		}
	}
	reg := cfg.Metrics
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if cfg.JWT != nil {
		jc := *cfg.JWT
		jc.Teams = adm
		if jc.Logger == nil {
			jc.Logger = cfg.Logger
		}
		jwksFailures := prometheus.NewCounter(prometheus.CounterOpts{Name: "llmplat_gateway_jwks_fetch_failures_total",
			Help: "JWKS fetches that failed; JWT callers with unknown key ids get 503 until one succeeds."})
		reg.MustRegister(jwksFailures)
		jc.OnJWKSFailure = jwksFailures.Inc
		if authn.JWT, err = auth.NewJWTVerifier(jc); err != nil {
			return Front{}, err
		}
		g.Go(func() error {
			<-ctx.Done()
			authn.JWT.Close() // a background refresh ends within its timeout
			return nil
		})
	}
	qcfg := quota.Config{Prefix: cfg.RedisPrefix, Logger: cfg.Logger}
	lim, err := quota.New(cfg.Redis, qcfg)
	if err != nil {
		return Front{}, err
	}
	queue, err := quota.NewQueue(cfg.Redis, qcfg)
	if err != nil {
		return Front{}, err
	}
	// Node control needs only Redis and the database, so the admin API can
	// drain, revoke and list nodes whichever process owns their sockets.
	nodeReg, err := registry.New(cfg.Redis, registry.Config{Prefix: cfg.RedisPrefix, Logger: cfg.Logger})
	if err != nil {
		return Front{}, err
	}
	nodes := orchestrator.NewControl(nodeReg, cfg.Redis, orchestrator.NewEvents(cfg.DB, nil), nil)
	adminAPI, err := admin.New(admin.Config{DB: cfg.DB, Ledger: cfg.Ledger, Authenticate: authn.Authenticate, Revoker: keys,
		NodeTokenRevoker: nodes, Nodes: nodes, Drainer: nodes, Logger: cfg.Logger})
	if err != nil {
		return Front{}, err
	}
	// Settles the database refused wait in Redis and are replayed here;
	// their tokens count on the key's day as the gateway's own do.
	settles := settlelog.New(cfg.Redis, cfg.RedisPrefix, cfg.Logger)
	countSettled, err := SweptTokens(cfg.Redis, cfg.RedisPrefix, cfg.Logger)
	if err != nil {
		return Front{}, err
	}
	g.Go(func() error { return settles.Run(ctx, cfg.Ledger, countSettled) })
	// The orchestrators publish which models are at zero; their callers
	// are answered at once and held as demand there.
	coldStarts, err := coldstart.New(cfg.Redis, cfg.RedisPrefix, nil)
	if err != nil {
		return Front{}, err
	}
	// The console's pending requests are the part of the pending gauge
	// every replica can read: the shared queue and the held callers.
	pending := func(ctx context.Context, model string) (int64, error) {
		queued, err := queue.Depth(ctx, model)
		if err != nil {
			return 0, err
		}
		held, err := coldStarts.Held(ctx, model)
		return queued + held, err
	}
	web, err := console.New(console.Config{Authenticate: authn.Authenticate, Redis: cfg.Redis, Prefix: cfg.RedisPrefix,
		Ledger: cfg.Ledger, DB: cfg.DB, Directory: adm, Nodes: nodes, Pending: pending, SelfService: adm, Revoker: keys,
		Logger: cfg.Logger})
	if err != nil {
		return Front{}, err
	}
	gcfg := gateway.Config{
		TLSCertFile:       cfg.TLSCertFile,
		TLSKeyFile:        cfg.TLSKeyFile,
		Dispatcher:        cfg.Dispatcher,
		Catalog:           gateway.NewCachedCatalog(adm.OpenAIModels, 0),
		Auth:              authn,
		Limits:            lim,
		Refusals:          lim,
		RefusalLog:        lim,
		Queue:             queue,
		Ledger:            cfg.Ledger,
		Quoter:            cfg.Ledger,
		Settles:           settles,
		ColdStarts:        coldStarts,
		Credit:            cfg.Ledger,
		URLGuard:          cfg.URLGuard,
		Metrics:           gateway.NewMetrics(reg),
		Admin:             adminAPI,
		Console:           web,
		QueueLimit:        cfg.QueueLimit,
		FirstTokenTimeout: cfg.FirstTokenTimeout,
		StreamIdleTimeout: cfg.StreamIdleTimeout,
		WakeHold:          cfg.WakeHold,
		Unserved:          cfg.Unserved,
		RedisTimeout:      cfg.RedisTimeout,
		DrainDelay:        cfg.DrainDelay,
		Logger:            cfg.Logger,
	}
	if cfg.Gateway != nil {
		cfg.Gateway(&gcfg)
	}
	gw, err := gateway.New(gcfg)
	if err != nil {
		return Front{}, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return Front{}, fmt.Errorf("gateway listen on %s: %w", cfg.Addr, err)
	}
	ln = proxyheader.Listen(ln, cfg.ProxyProtocolFrom)
	served := make(chan struct{}) // closed once Serve has drained and shut down
	g.Go(func() error { defer close(served); return gw.Serve(ctx, ln) })
	mln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		ln.Close()
		return Front{}, fmt.Errorf("metrics listen on %s: %w", cfg.MetricsAddr, err)
	}
	msrv := httpserve.New(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	g.Go(func() error {
		if err := msrv.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-served // a draining gateway is still scraped
		return msrv.Close()
	})
	scheme := "http://"
	if cfg.TLSCertFile != "" {
		scheme = "https://"
	}
	return Front{Base: scheme + ln.Addr().String(), Metrics: "http://" + mln.Addr().String(), Server: gw}, nil
}
