package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/clusterwatch"
	"github.com/llmplat/llmplat/runtime/coldstart"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/httpserve"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/routing"
)

func init() {
	register("orchestrator", "run an orchestrator replica: node sockets, routing, internal dispatch", runOrchestrator)
}

// internalTokenEnv holds the shared bearer token of internal dispatch: a
// flag would show it in the process list.
const internalTokenEnv = "LLMPLAT_INTERNAL_TOKEN"

// serverShutdown bounds an HTTP server's shutdown once its work is done.
const serverShutdown = 5 * time.Second

func runOrchestrator(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("orchestrator", envDatabaseURL, envDBSecret, envRedisURL, envInternalToken)
	host, _ := os.Hostname()
	id := fs.String("id", host, "this replica's id (the pod name)")
	addr := fs.String("addr", ":8090", "node socket listen address ("+orchestrator.ConnectPath+")")
	internalAddr := fs.String("internal-addr", ":8091", "internal dispatch listen address, for gateways (token in env "+internalTokenEnv+")")
	metricsAddr := fs.String("metrics-addr", "127.0.0.1:9465", "Prometheus /metrics listen address: loopback by default; :9465 for a Prometheus scraping the pod")
	tlsCert := fs.String("tls-cert", "", "TLS certificate file for node sockets (wss://)")
	tlsKey := fs.String("tls-key", "", "TLS key file")
	dbURL := fs.String("database-url", os.Getenv("LLMPLAT_DATABASE_URL"), "PostgreSQL URL (env LLMPLAT_DATABASE_URL)")
	dbSecret := fs.String("database-password-secret", os.Getenv(dbSecretEnv), "ARN of the secret holding the rotated database password (env "+dbSecretEnv+")")
	redisURL := fs.String("redis-url", os.Getenv("LLMPLAT_REDIS_URL"), "Redis URL (env LLMPLAT_REDIS_URL)")
	prefix := fs.String("redis-prefix", "llmplat:", "prefix of every Redis key")
	policy := fs.String("policy", routing.Default, fmt.Sprintf("routing policy, one of %v", routing.Names()))
	rate := fs.Int("registrations-per-second", orchestrator.DefaultRegistrationsPerSecond, "cluster-wide node registrations per second")
	var cloud cloudNodes
	fs.Var(&cloud, "cloud-node", "an engine reached by HTTP, without an agent (repeatable): 'id=url;name=…,served=…,max-num-seqs=…,max-model-len=…,kv-tokens=…'; for a cluster without the Kubernetes API")
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster whose model Services are the cloud nodes (env KUBECONFIG); in a pod the cluster's own API is used without it")
	namespace := fs.String("namespace", os.Getenv("POD_NAMESPACE"), "namespace of the model Services and the controller's Lease (env POD_NAMESPACE); default: the pod's or the kubeconfig's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	token, err := internalToken()
	if err != nil {
		return err
	}
	pol, err := routing.New(*policy)
	if err != nil {
		return err
	}
	logger := newLogger(os.Stderr)
	db, rdb, err := openStores(ctx, *dbURL, *dbSecret, *redisURL)
	if err != nil {
		return err
	}
	defer db.Close()
	defer rdb.Close()
	reg, err := registry.New(rdb, registry.Config{Prefix: *prefix, Logger: logger})
	if err != nil {
		return err
	}
	queue, err := quota.NewQueue(rdb, quota.Config{Prefix: *prefix})
	if err != nil {
		return err
	}
	models := admin.NewSQLStore(db)
	promReg := prometheus.NewRegistry()
	promReg.MustRegister(collectors.NewGoCollector())
	// Cloud nodes come from -cloud-node when given, else from the cluster's
	// model Services when there is a cluster API; the controller drains
	// through the replica, which exists only after it.
	var (
		o     *orchestrator.Orchestrator
		watch *clusterwatch.Controller
	)
	if len(cloud) == 0 {
		watch, err = newClusterWatch(*kubeconfig, *namespace, *id, clusterwatch.DrainFunc(
			func(ctx context.Context, ids []string, reason string) error { return o.DrainCloud(ctx, ids, reason) }), logger)
		if err != nil {
			return err
		}
	}
	coldStarts, err := coldstart.New(rdb, *prefix, nil)
	if err != nil {
		return err
	}
	ocfg := orchestrator.Config{
		ID: *id, Redis: rdb, Registry: reg, Tokens: admin.NewSQLNodeTokens(db), Events: orchestrator.NewEvents(db, nil),
		Policy: pol, RegistrationsPerSecond: *rate, CloudNodes: cloud, Pending: queue.Depth, Models: models.ModelNames,
		ColdStarts: coldStarts, Metrics: orchestrator.NewMetrics(promReg), Logger: logger,
	}
	if watch != nil {
		ocfg.Cloud = watch
	}
	o, err = orchestrator.New(ocfg)
	if err != nil {
		return err
	}

	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return o.Run(gctx) })
	if watch != nil {
		g.Go(func() error { return watch.Run(gctx) })
	}
	servers := []struct {
		addr    string
		handler http.Handler
		tls     bool
	}{
		{*addr, o.Handler(), *tlsCert != ""},
		{*internalAddr, dispatch.NewRemoteHandler(o, token, logger), false},
		{*metricsAddr, promhttp.HandlerFor(promReg, promhttp.HandlerOpts{}), false},
	}
	var (
		started []*http.Server
		bound   []string
	)
	// stop ends Run, then the servers: on a signal, or when a server could
	// not start, which would otherwise leave those already serving.
	stop := func() {
		stopRun()
		for _, srv := range started {
			sctx, cancel := context.WithTimeout(context.Background(), serverShutdown)
			_ = srv.Shutdown(sctx)
			cancel()
		}
	}
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			stop()
			return errors.Join(fmt.Errorf("listen on %s: %w", s.addr, err), g.Wait())
		}
		srv := httpserve.New(s.handler)
		started, bound = append(started, srv), append(bound, ln.Addr().String())
		useTLS := s.tls
		g.Go(func() error {
			var err error
			if useTLS {
				err = srv.ServeTLS(ln, *tlsCert, *tlsKey)
			} else {
				err = srv.Serve(ln)
			}
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		})
	}
	fmt.Fprintf(stdout, "llmplat orchestrator %s: nodes on %s, internal dispatch on %s, metrics on %s\n", *id, bound[0], bound[1], bound[2])
	// On a signal Run asks the nodes to reconnect elsewhere and lets their
	// requests finish; the servers close after it.
	select {
	case <-ctx.Done():
	case <-gctx.Done():
	}
	stop()
	return g.Wait()
}

// cloudNodes collects repeated -cloud-node values.
type cloudNodes []orchestrator.CloudNode

func (c *cloudNodes) String() string { return fmt.Sprint(*c) }

// Set reads "id=url;model-spec", the model spec as the agent's -model.
func (c *cloudNodes) Set(v string) error {
	head, spec, ok := strings.Cut(v, ";")
	id, url, ok2 := strings.Cut(head, "=")
	if !ok || !ok2 || !strings.HasPrefix(url, "http") {
		return errors.New("want id=http://host:port;name=…,served=…,max-num-seqs=…,max-model-len=…,kv-tokens=…")
	}
	m, err := nodeagent.ParseModel(spec)
	if err != nil {
		return err
	}
	*c = append(*c, orchestrator.CloudNode{ID: id, URL: strings.TrimSuffix(url, "/"), Models: []registry.ModelSlot{{
		Name: m.Name, ServedName: m.ServedName, MaxNumSeqs: m.MaxNumSeqs, MaxModelLen: m.MaxModelLen, KVCapacityTokens: m.KVCapacityTokens}}})
	return nil
}
