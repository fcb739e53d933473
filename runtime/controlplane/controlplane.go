package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/coldstart"
	"github.com/llmplat/llmplat/runtime/httpserve"
	"github.com/llmplat/llmplat/runtime/internalhop"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/store"
)

// serverShutdown bounds a server's shutdown once the replica has stopped:
// its node sockets are closed by then, and a gateway's internal dispatch
// still open has had the replica's whole shutdown grace.
const serverShutdown = 5 * time.Second

// ErrConfig means a Config is unusable.
var ErrConfig = errors.New("controlplane: invalid config")

// Config is what a replica needs.
type Config struct {
	// Orchestrator holds the replica's own settings (ID, Redis, policy,
	// cloud nodes, grace, clock, logger). Each of its parts left nil is
	// built here from DB and Redis: Registry, Tokens, Events, Pending (the
	// gateways' queue depth), Models (the declared models), ColdStarts and
	// Metrics. Tests set a part to wrap it.
	Orchestrator orchestrator.Config
	// DB holds the node tokens, the node events and the declared models.
	DB *store.DB
	// RedisPrefix namespaces every Redis key, as the gateways' does.
	RedisPrefix string
	// Addr is the node socket's listen address; empty serves no socket
	// here (the caller serves Replica.Orchestrator.Handler() itself).
	Addr string
	// TLSCertFile and TLSKeyFile turn on TLS on the node socket (wss://).
	TLSCertFile, TLSKeyFile string
	// InternalAddr, when set, serves internal dispatch to gateways, each
	// call bearing InternalToken.
	InternalAddr, InternalToken string
	// MetricsAddr, when set, serves Metrics' /metrics.
	MetricsAddr string
	// Metrics is the registry the replica's metrics join; nil means one of
	// its own.
	Metrics *prometheus.Registry
}

// Replica is a running orchestrator replica.
type Replica struct {
	Orchestrator *orchestrator.Orchestrator
	// Metrics gathers the replica's metrics.
	Metrics prometheus.Gatherer
	// NodeURL is where nodes dial (empty when Addr is); Internal and
	// MetricsURL are the internal dispatch's and /metrics' base URLs
	// (empty when not served).
	NodeURL, Internal, MetricsURL string
}

// Start builds a replica and runs it and its servers in g until ctx ends.
// The servers shut down once the replica has let its sockets go, so
// in-flight internal dispatches finish within the replica's grace.
func Start(ctx context.Context, g *errgroup.Group, cfg Config) (Replica, error) {
	oc, reg, err := cfg.parts()
	if err != nil {
		return Replica{}, err
	}
	o, err := orchestrator.New(oc)
	if err != nil {
		return Replica{}, err
	}
	r := Replica{Orchestrator: o, Metrics: reg}
	type server struct {
		addr    string
		handler http.Handler
		tls     bool
		url     *string
		scheme  string
	}
	nodeScheme := "ws://"
	if cfg.TLSCertFile != "" {
		nodeScheme = "wss://"
	}
	var servers []server
	if cfg.Addr != "" {
		servers = append(servers, server{cfg.Addr, o.Handler(), cfg.TLSCertFile != "", &r.NodeURL, nodeScheme})
	}
	if cfg.InternalAddr != "" {
		servers = append(servers, server{cfg.InternalAddr, internalhop.NewRemoteHandler(o, cfg.InternalToken, oc.Logger), false, &r.Internal, "http://"})
	}
	if cfg.MetricsAddr != "" {
		servers = append(servers, server{cfg.MetricsAddr, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), false, &r.MetricsURL, "http://"})
	}
	listeners := make([]net.Listener, 0, len(servers))
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return Replica{}, fmt.Errorf("listen on %s: %w", s.addr, err)
		}
		listeners = append(listeners, ln)
		*s.url = s.scheme + ln.Addr().String()
	}
	if r.NodeURL != "" {
		r.NodeURL += orchestrator.ConnectPath
	}
	started := make([]*http.Server, 0, len(servers))
	for i, s := range servers {
		srv := httpserve.New(s.handler)
		started = append(started, srv)
		ln, useTLS := listeners[i], s.tls
		g.Go(func() error {
			var err error
			if useTLS {
				err = srv.ServeTLS(ln, cfg.TLSCertFile, cfg.TLSKeyFile)
			} else {
				err = srv.Serve(ln)
			}
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		})
	}
	g.Go(func() error {
		err := o.Run(ctx)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serverShutdown)
		defer cancel()
		for _, srv := range started {
			err = errors.Join(err, srv.Shutdown(sctx))
		}
		return err
	})
	return r, nil
}

// parts fills the orchestrator's config with the parts left nil and
// returns it with the metrics' registry.
func (cfg Config) parts() (orchestrator.Config, *prometheus.Registry, error) {
	oc := cfg.Orchestrator
	if cfg.DB == nil || oc.Redis == nil {
		return oc, nil, fmt.Errorf("%w: a database and Redis are required", ErrConfig)
	}
	var err error
	if oc.Registry == nil {
		if oc.Registry, err = registry.New(oc.Redis, registry.Config{Prefix: cfg.RedisPrefix, Logger: oc.Logger}); err != nil {
			return oc, nil, err
		}
	}
	if oc.Tokens == nil {
		oc.Tokens = admin.NewSQLNodeTokens(cfg.DB)
	}
	if oc.Events == nil {
		oc.Events = orchestrator.NewEvents(cfg.DB, oc.Clock)
	}
	if oc.Pending == nil {
		queue, err := quota.NewQueue(oc.Redis, quota.Config{Prefix: cfg.RedisPrefix, Logger: oc.Logger})
		if err != nil {
			return oc, nil, err
		}
		oc.Pending = queue.Depth
	}
	if oc.Models == nil {
		oc.Models = admin.NewSQLStore(cfg.DB).ModelNames
	}
	if oc.ColdStarts == nil {
		if oc.ColdStarts, err = coldstart.New(oc.Redis, cfg.RedisPrefix, nil); err != nil {
			return oc, nil, err
		}
	}
	reg := cfg.Metrics
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if oc.Metrics == nil {
		oc.Metrics = orchestrator.NewMetrics(reg)
	}
	return oc, reg, nil
}
