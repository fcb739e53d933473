package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/frontdoor"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/internalhop"
	"github.com/llmplat/llmplat/runtime/proxyheader"
)

func init() {
	register("gateway", "run the OpenAI-compatible gateway and the admin API", runGateway)
}

// engineFlags collects --engine model=url[,url…][@max-in-flight] values.
type engineFlags map[string][]engineclient.Target

func (e engineFlags) String() string { return fmt.Sprint(map[string][]engineclient.Target(e)) }

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
		// The served name is the model's served_name in the admin API.
		e[model] = append(e[model], engineclient.Target{URL: strings.TrimSuffix(u, "/"), MaxInFlight: maxInFlight})
	}
	return nil
}

func runGateway(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("gateway", envDatabaseURL, envDBSecret, envRedisURL, envAdminToken, envInternalToken)
	var cfg frontdoor.Config
	engines := engineFlags{}
	fs.StringVar(&cfg.Addr, "addr", ":8080", "API listen address")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "127.0.0.1:9464", "Prometheus /metrics listen address: loopback by default, since metrics name teams and models; :9464 for a Prometheus scraping the pod")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert", "", "TLS certificate file (TLS at the edge when set with -tls-key)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key", "", "TLS key file")
	proxyFrom := fs.String("proxy-protocol-from", "", "comma-separated CIDRs of the load balancer (its subnets) whose connections open with a PROXY protocol header naming the client;\na header from any other address is refused; empty reads none")
	dbURL := fs.String("database-url", os.Getenv("LLMPLAT_DATABASE_URL"), "PostgreSQL URL (env LLMPLAT_DATABASE_URL)")
	dbSecret := fs.String("database-password-secret", os.Getenv(dbSecretEnv), "ARN of the secret holding the rotated database password (env "+dbSecretEnv+")")
	redisURL := fs.String("redis-url", os.Getenv("LLMPLAT_REDIS_URL"), "Redis URL (env LLMPLAT_REDIS_URL)")
	fs.StringVar(&cfg.RedisPrefix, "redis-prefix", "llmplat:", "prefix of every Redis key")
	orchURL := fs.String("orchestrator", "", "the orchestrators' internal dispatch URL (token in env "+internalTokenEnv+")")
	fs.Var(engines, "engine", "model=url[,url…][@max-in-flight]: engines to dispatch to directly, repeatable, instead of -orchestrator;\nrequests carry the model's served_name from the admin API")
	var jwt jwtFlags
	jwt.register(fs)
	fs.DurationVar(&cfg.QueueLimit, "queue-limit", gateway.DefaultQueueLimit, "longest wait in a model's queue before 503")
	fs.DurationVar(&cfg.FirstTokenTimeout, "first-token-timeout", gateway.DefaultFirstTokenTimeout, "longest wait for an engine's first event")
	fs.DurationVar(&cfg.StreamIdleTimeout, "stream-idle-timeout", gateway.DefaultStreamIdleTimeout, "longest silence between two engine events once streaming")
	wakeHold := fs.Duration("wake-hold", gateway.DefaultWakeHold, "longest hold of a caller of a model at zero for its first ready replica, before 503 with Retry-After (0: answered at once)")
	fs.DurationVar(&cfg.DrainDelay, "drain-delay", 0, "on SIGTERM, serve on this long with /healthz answering 503 before shutting down, while a load balancer stops sending connections (0: shut down at once)")
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
	proxySources, err := proxyheader.ParsePrefixes(*proxyFrom)
	if err != nil {
		return fmt.Errorf("-proxy-protocol-from: %w", err)
	}
	cfg.ProxyProtocolFrom = proxySources
	cfg.WakeHold = *wakeHold
	if cfg.WakeHold <= 0 {
		cfg.WakeHold = -1 // the flag's 0 is "answered at once"; the config's is its default
	}
	// The admin token comes from the environment only: flags show in ps.
	cfg.AdminToken = os.Getenv("LLMPLAT_ADMIN_TOKEN")
	cfg.Logger = newLogger(os.Stderr)
	jwtCfg, err := jwt.config()
	if err != nil {
		return err
	}
	cfg.JWT = jwtCfg
	if jwtCfg != nil && jwtCfg.Limits.RPM == 0 && jwtCfg.Limits.TokensPerDay == 0 && jwtCfg.Limits.MaxStreams == 0 {
		cfg.Logger.Warn("JWT callers have no limits: set -jwt-rpm, -jwt-tokens-per-day and -jwt-max-streams")
	}
	if cfg.AdminToken == "" && jwtCfg == nil {
		return errors.New("the admin API has no credential: set LLMPLAT_ADMIN_TOKEN (at least 32 characters), or -jwks-url for admin-role JWTs")
	}
	if *orchURL != "" {
		base, err := orchestratorBase(*orchURL)
		if err != nil {
			return err
		}
		token, err := internalToken()
		if err != nil {
			return err
		}
		cfg.Dispatcher = internalhop.NewRemote(base, token, nil)
	}

	db, rdb, err := openStores(ctx, *dbURL, *dbSecret, *redisURL)
	if err != nil {
		return err
	}
	defer db.Close()
	defer rdb.Close()
	cfg.DB, cfg.Redis = db, rdb
	if cfg.Dispatcher == nil {
		cfg.Dispatcher = frontdoor.NewDirect(engines, db)
	}
	if cfg.Ledger, err = frontdoor.NewLedger(db, rdb, cfg.RedisPrefix, cfg.Logger); err != nil {
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

// orchestratorBase checks -orchestrator: the base URL of the orchestrators'
// internal listener, such as http://orchestrator:8091, without a path.
func orchestratorBase(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("-orchestrator %q: %w", raw, err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return "", fmt.Errorf("-orchestrator %q: want http:// or https:// and a host, such as http://orchestrator:8091", raw)
	case strings.TrimSuffix(u.Path, "/") != "", u.RawQuery != "", u.Fragment != "":
		return "", fmt.Errorf("-orchestrator %q: give the base URL of the orchestrators' internal listener without a path (%s is added), such as %s://%s",
			raw, internalhop.RemotePath, u.Scheme, u.Host)
	}
	return u.Scheme + "://" + u.Host, nil
}

// minInternalTokenLen is the shortest internal dispatch token accepted:
// 32 characters of a random secret are beyond guessing.
const minInternalTokenLen = 32

// internalToken reads the internal dispatch token from the environment.
func internalToken() (string, error) {
	token := os.Getenv(internalTokenEnv)
	if len(token) < minInternalTokenLen {
		return "", fmt.Errorf("%s must be set to a secret of at least %d characters (make one: openssl rand -hex 32); gateways and orchestrators share it",
			internalTokenEnv, minInternalTokenLen)
	}
	return token, nil
}

// jwtFlags are the gateway's JWT settings. JWT callers have no row to hold
// limits as API keys do, so the limits every JWT caller gets are flags.
type jwtFlags struct {
	jwksURL, issuer, audience, models string
	rpm, maxStreams, maxTokens        int
	tokensPerDay                      int64
}

func (j *jwtFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&j.jwksURL, "jwks-url", "", "accept JWTs verified against this JWKS URL")
	fs.StringVar(&j.issuer, "jwt-issuer", "", "required iss of JWTs")
	fs.StringVar(&j.audience, "jwt-audience", "", "required aud of JWTs")
	fs.IntVar(&j.rpm, "jwt-rpm", 0, "requests per minute of each JWT caller (0: no limit)")
	fs.Int64Var(&j.tokensPerDay, "jwt-tokens-per-day", 0, "tokens per UTC day of each JWT caller (0: no limit)")
	fs.IntVar(&j.maxStreams, "jwt-max-streams", 0, "concurrent streams of each JWT caller (0: no limit)")
	fs.IntVar(&j.maxTokens, "jwt-max-tokens", 0, "the most output tokens a JWT caller's request may ask for; more, or none, is clamped to it (0: no cap)")
	fs.StringVar(&j.models, "jwt-models", "", "comma-separated models JWT callers may use (empty: all)")
}

// config returns the JWT configuration, or nil when JWTs are not accepted.
func (j *jwtFlags) config() (*auth.JWTConfig, error) {
	lim := auth.Limits{RPM: j.rpm, TokensPerDay: j.tokensPerDay, MaxStreams: j.maxStreams, MaxTokens: j.maxTokens}
	for _, m := range strings.Split(j.models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			lim.ModelAllowlist = append(lim.ModelAllowlist, m)
		}
	}
	switch {
	case j.rpm < 0 || j.tokensPerDay < 0 || j.maxStreams < 0 || j.maxTokens < 0:
		return nil, errors.New("-jwt-rpm, -jwt-tokens-per-day, -jwt-max-streams and -jwt-max-tokens must not be negative")
	case j.jwksURL == "" && (j.issuer != "" || j.audience != "" || j.models != "" || lim.RPM != 0 || lim.TokensPerDay != 0 ||
		lim.MaxStreams != 0 || lim.MaxTokens != 0):
		return nil, errors.New("the -jwt-* flags need -jwks-url")
	case j.jwksURL == "":
		return nil, nil
	}
	return &auth.JWTConfig{JWKSURL: j.jwksURL, Issuer: j.issuer, Audience: j.audience, Limits: lim}, nil
}
