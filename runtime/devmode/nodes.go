package devmode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/httpserve"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/quota"
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
	// serverShutdown bounds the node socket server's shutdown.
	serverShutdown = 2 * time.Second
)

// startControlPlane runs the orchestrator on a loopback socket and one node
// agent per engine, dialling it over a real WebSocket as an on-premises
// node would, and waits until every node has registered.
// Its socket listens on addr; the URL node agents dial is returned. The
// local agents' tokens are those kept in sec, minted on a first start.
func startControlPlane(ctx context.Context, g *errgroup.Group, db *store.DB, rdb redis.UniversalClient, addr string,
	sec *secrets, engines map[string]engine, logger *slog.Logger) (*orchestrator.Orchestrator, string, error) {
	reg, err := registry.New(rdb, registry.Config{Prefix: redisPrefix, Logger: logger})
	if err != nil {
		return nil, "", err
	}
	queue, err := quota.NewQueue(rdb, quota.Config{Prefix: redisPrefix})
	if err != nil {
		return nil, "", err
	}
	tokens := admin.NewSQLNodeTokens(db)
	o, err := orchestrator.New(orchestrator.Config{
		ID: replicaID, Redis: rdb, Registry: reg, Tokens: tokens, Events: orchestrator.NewEvents(db, nil),
		Pending: queue.Depth, ShutdownGrace: shutdownGrace, Logger: logger,
	})
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("orchestrator listen: %w", err)
	}
	srv := httpserve.New(o.Handler())
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		err := o.Run(ctx)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serverShutdown)
		defer cancel()
		return errors.Join(err, srv.Shutdown(sctx))
	})
	serverURL := "ws://" + ln.Addr().String() + orchestrator.ConnectPath
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
