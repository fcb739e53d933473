package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/clusterwatch"
	"github.com/llmplat/llmplat/runtime/controlplane"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/routing"
)

func init() {
	register("orchestrator", "run an orchestrator replica: node sockets, routing, internal dispatch", runOrchestrator)
}

// internalTokenEnv holds the shared bearer token of internal dispatch: a
// flag would show it in the process list.
const internalTokenEnv = "LLMPLAT_INTERNAL_TOKEN"

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
	drainDelay := fs.Duration("drain-delay", 0, "on SIGTERM, serve node sockets on this long with the node socket's /healthz answering 503 before asking nodes to reconnect elsewhere (0: at once)")
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
		watch, err = newClusterWatch(*kubeconfig, *namespace, *id, clusterwatch.DrainerFuncs{
			Drain:  func(ctx context.Context, ids []string, reason string) error { return o.DrainCloud(ctx, ids, reason) },
			Resume: func(ctx context.Context, ids []string, reason string) error { return o.ResumeCloud(ctx, ids, reason) },
		}, logger)
		if err != nil {
			return err
		}
		// The stranded-replica gauge a single-replica model's ScaledObject
		// scales on, when a disruption would leave it without a replica.
		if watch != nil {
			promReg.MustRegister(watch)
		}
	}
	ocfg := orchestrator.Config{ID: *id, Redis: rdb, Policy: pol, RegistrationsPerSecond: *rate, CloudNodes: cloud,
		DrainDelay: *drainDelay, Logger: logger}
	if watch != nil {
		ocfg.Cloud = watch
	}
	// On a signal the replica asks the nodes to reconnect elsewhere and
	// lets their requests finish; its servers close after it.
	g, gctx := errgroup.WithContext(ctx)
	rep, err := controlplane.Start(gctx, g, controlplane.Config{Orchestrator: ocfg, DB: db, RedisPrefix: *prefix,
		Addr: *addr, TLSCertFile: *tlsCert, TLSKeyFile: *tlsKey, InternalAddr: *internalAddr, InternalToken: token,
		MetricsAddr: *metricsAddr, Metrics: promReg})
	if err != nil {
		return errors.Join(err, g.Wait())
	}
	o = rep.Orchestrator
	if watch != nil {
		g.Go(func() error { return watch.Run(gctx) })
	}
	fmt.Fprintf(stdout, "llmplat orchestrator %s: nodes on %s, internal dispatch on %s, metrics on %s\n", *id,
		hostPort(rep.NodeURL), hostPort(rep.Internal), hostPort(rep.MetricsURL))
	return g.Wait()
}

// hostPort is the host:port of a URL Start returned.
func hostPort(u string) string {
	_, rest, _ := strings.Cut(u, "://")
	return strings.TrimSuffix(rest, orchestrator.ConnectPath)
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
