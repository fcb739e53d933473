package devmode

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/controlplane"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/store"
)

// Local control plane settings.
const (
	// replicaID names the local mode's one orchestrator replica.
	replicaID = "local"
	// shutdownGrace is short locally: Ctrl-C should not wait 30 s for
	// streams nobody is watching.
	shutdownGrace = 2 * time.Second
)

// startControlPlane runs the orchestrator replica, through the wiring the
// orchestrator command uses, on a loopback socket and one node agent per
// engine, dialling it over a real WebSocket as an on-premises node would,
// and waits until every node has registered. Its socket listens on addr;
// the URL node agents dial is returned; its metrics join metrics. The
// local agents' tokens are those kept in sec, minted on a first start.
func startControlPlane(ctx context.Context, g *errgroup.Group, db *store.DB, rdb redis.UniversalClient, addr string,
	sec *secrets, engines map[string]engine, metrics *prometheus.Registry, logger *slog.Logger) (*orchestrator.Orchestrator, string, error) {
	reg, err := registry.New(rdb, registry.Config{Prefix: redisPrefix, Logger: logger})
	if err != nil {
		return nil, "", err
	}
	tokens := admin.NewSQLNodeTokens(db)
	rep, err := controlplane.Start(ctx, g, controlplane.Config{
		Orchestrator: orchestrator.Config{ID: replicaID, Redis: rdb, Registry: reg, Tokens: tokens,
			ShutdownGrace: shutdownGrace, Logger: logger},
		DB: db, RedisPrefix: redisPrefix, Addr: addr, Metrics: metrics,
	})
	if err != nil {
		return nil, "", err
	}
	serverURL := rep.NodeURL
	o := rep.Orchestrator
	for name, eng := range engines {
		nodeID := "local-" + name
		token, err := sec.nodeToken(ctx, tokens, nodeID, time.Now())
		if err != nil {
			return nil, "", err
		}
		a, err := nodeagent.New(nodeagent.Config{
			ServerURL: serverURL, NodeID: nodeID, Token: nodeproto.Secret(token), EngineURL: eng.url,
			Models: []nodeproto.Model{{Name: name, ServedName: name, MaxNumSeqs: eng.maxNumSeqs,
				MaxModelLen: int(eng.maxModelLen), KVCapacityTokens: eng.kvTokens}},
			Version: "dev", Logger: logger,
		})
		if err != nil {
			return nil, "", err
		}
		g.Go(func() error { return a.Run(ctx) })
	}
	if err := waitNodes(ctx, reg, len(engines)); err != nil {
		return nil, "", err
	}
	return o, serverURL, nil
}

// waitNodes waits until n nodes are in the registry.
func waitNodes(ctx context.Context, reg *registry.Registry, n int) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		nodes, err := reg.List(ctx)
		if err == nil && len(nodes) == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes not registered: %d of %d: %w", len(nodes), n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
