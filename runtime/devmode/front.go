package devmode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

// redisPrefix namespaces the local mode's keys.
const redisPrefix = "llmplat:"

type frontDeps struct {
	cfg     Config
	rdb     *redis.Client
	db      *store.DB
	led     *ledger.Ledger
	adm     *admin.SQLStore
	targets map[string][]dispatch.Target
}

// front is the running gateway: its URL, its metrics URL and the admin
// token that opens /admin.
type front struct {
	base, metrics, adminToken string
}

// newFront builds the production gateway on the embedded stores: the key
// cache, the Redis limits and queue, the ledger, the admin API, and a
// metrics listener of its own.
func newFront(ctx context.Context, g *errgroup.Group, d frontDeps) (front, error) {
	keys, err := auth.NewKeyCache(auth.KeyCacheConfig{Store: d.adm, Redis: d.rdb, Prefix: redisPrefix, Logger: d.cfg.Logger})
	if err != nil {
		return front{}, err
	}
	g.Go(func() error { return keys.Run(ctx) })
	adminToken, err := auth.GenerateAdminToken()
	if err != nil {
		return front{}, err
	}
	static, err := auth.NewStaticAdminToken(adminToken)
	if err != nil {
		return front{}, err
	}
	authn := &auth.Authenticator{Keys: keys, Admin: static}
	qcfg := quota.Config{Prefix: redisPrefix}
	lim, err := quota.New(d.rdb, qcfg)
	if err != nil {
		return front{}, err
	}
	queue, err := quota.NewQueue(d.rdb, qcfg)
	if err != nil {
		return front{}, err
	}
	adminAPI, err := admin.New(admin.Config{DB: d.db, Ledger: d.led, Authenticate: authn.Authenticate, Revoker: keys, Logger: d.cfg.Logger})
	if err != nil {
		return front{}, err
	}
	reg := prometheus.NewRegistry()
	gw, err := gateway.New(gateway.Config{
		Dispatcher: dispatch.NewDirect(d.targets, nil),
		Catalog:    gateway.NewCachedCatalog(d.adm.OpenAIModels, 0),
		Auth:       authn,
		Limits:     lim,
		Queue:      queue,
		Ledger:     d.led,
		// The local mode has no DNS to ask: a name that cannot be
		// resolved is let through, internal addresses are still refused.
		URLGuard: &urlguard.Guard{AllowUnresolvable: true},
		Metrics:  gateway.NewMetrics(reg),
		Admin:    adminAPI,
		Logger:   d.cfg.Logger,
	})
	if err != nil {
		return front{}, err
	}
	ln, err := net.Listen("tcp", d.cfg.Addr)
	if err != nil {
		return front{}, fmt.Errorf("gateway listen on %s: %w", d.cfg.Addr, err)
	}
	g.Go(func() error { return gw.Serve(ctx, ln) })
	mln, err := net.Listen("tcp", d.cfg.MetricsAddr)
	if err != nil {
		return front{}, fmt.Errorf("metrics listen on %s: %w", d.cfg.MetricsAddr, err)
	}
	msrv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: readHeaderTimeout}
	g.Go(func() error {
		if err := msrv.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		return msrv.Close()
	})
	return front{base: "http://" + ln.Addr().String(), metrics: "http://" + mln.Addr().String(), adminToken: adminToken}, nil
}

// readHeaderTimeout stops slow-loris clients on the metrics port.
const readHeaderTimeout = 10 * time.Second
