package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/frontdoor"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/orchestrator"
)

func init() {
	register("gateway", "run the OpenAI-compatible gateway and the admin API", runGateway)
}

// engineFlags collects --engine model=url[,url…][@max-in-flight] values.
type engineFlags map[string][]dispatch.Target

func (e engineFlags) String() string { return fmt.Sprint(map[string][]dispatch.Target(e)) }

func (e engineFlags) Set(v string) error {
	model, rest, ok := strings.Cut(v, "=")
	if !ok || model == "" || rest == "" {
		return errors.New("want model=url[,url…][@max-in-flight]")
	}
	urls, capStr, hasCap := strings.Cut(rest, "@")
	maxInFlight := 0
	if hasCap {
		n, err := strconv.Atoi(capStr)
		if err != nil || n < 1 {
			return fmt.Errorf("bad max-in-flight %q", capStr)
		}
		maxInFlight = n
	}
	for _, u := range strings.Split(urls, ",") {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return fmt.Errorf("engine URL %q must start with http:// or https://", u)
		}
		e[model] = append(e[model], dispatch.Target{URL: strings.TrimSuffix(u, "/"), ServedName: model, MaxInFlight: maxInFlight})
	}
	return nil
}

func runGateway(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("gateway")
	var cfg frontdoor.Config
	engines := engineFlags{}
	fs.StringVar(&cfg.Addr, "addr", ":8080", "API listen address")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", ":9464", "Prometheus /metrics listen address")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert", "", "TLS certificate file (TLS at the edge when set with -tls-key)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key", "", "TLS key file")
	dbURL := fs.String("database-url", os.Getenv("LLMPLAT_DATABASE_URL"), "PostgreSQL URL (env LLMPLAT_DATABASE_URL)")
	redisURL := fs.String("redis-url", os.Getenv("LLMPLAT_REDIS_URL"), "Redis URL (env LLMPLAT_REDIS_URL)")
	fs.StringVar(&cfg.RedisPrefix, "redis-prefix", "llmplat:", "prefix of every Redis key")
	orchURL := fs.String("orchestrator", "", "the orchestrators' internal dispatch URL (token in env "+internalTokenEnv+")")
	fs.Var(engines, "engine", "model=url[,url…][@max-in-flight]: engines to dispatch to directly, repeatable, instead of -orchestrator")
	jwksURL := fs.String("jwks-url", "", "accept JWTs verified against this JWKS URL")
	jwtIssuer := fs.String("jwt-issuer", "", "required iss of JWTs")
	jwtAudience := fs.String("jwt-audience", "", "required aud of JWTs")
	fs.DurationVar(&cfg.QueueLimit, "queue-limit", gateway.DefaultQueueLimit, "longest wait in a model's queue before 503")
	fs.DurationVar(&cfg.FirstTokenTimeout, "first-token-timeout", gateway.DefaultFirstTokenTimeout, "longest wait for an engine's first event")
	sweep := fs.Bool("sweep", true, "run the ledger sweeper in this process")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case len(engines) == 0 && *orchURL == "":
		return errors.New("-orchestrator URL (or at least one -engine model=url) is required")
	case len(engines) > 0 && *orchURL != "":
		return errors.New("-orchestrator and -engine exclude each other")
	}
	// The admin token comes from the environment only: flags show in ps.
	cfg.AdminToken = os.Getenv("LLMPLAT_ADMIN_TOKEN")
	if *jwksURL != "" {
		cfg.JWT = &auth.JWTConfig{JWKSURL: *jwksURL, Issuer: *jwtIssuer, Audience: *jwtAudience}
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if *orchURL != "" {
		token := os.Getenv(internalTokenEnv)
		if token == "" {
			return errors.New(internalTokenEnv + " is required with -orchestrator")
		}
		cfg.Dispatcher = dispatch.NewRemote(strings.TrimSuffix(*orchURL, "/"), token, nil)
	} else {
		cfg.Dispatcher = dispatch.NewDirect(engines, nil)
	}

	db, rdb, err := openStores(ctx, *dbURL, *redisURL)
	if err != nil {
		return err
	}
	defer db.Close()
	defer rdb.Close()
	cfg.DB, cfg.Redis = db, rdb
	// The sweeper settles orphaned rows from the nodes' done frames, which
	// the orchestrators keep in Redis.
	completions := orchestrator.NewCompletionLog(rdb, cfg.RedisPrefix)
	if cfg.Ledger, err = ledger.New(db, ledger.Config{Completions: completions, Logger: cfg.Logger}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	if *sweep {
		g.Go(func() error { return cfg.Ledger.Run(ctx) })
	}
	front, err := frontdoor.Start(ctx, g, cfg)
	if err != nil {
		cancel()
		return errors.Join(err, g.Wait())
	}
	fmt.Fprintf(stdout, "llmplat gateway: serving %s (metrics %s/metrics)\n", front.Base, front.Metrics)
	return g.Wait()
}

var _ flag.Value = engineFlags{}
