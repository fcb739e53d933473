package platformtest

import (
	"context"
	"errors"
	"net/http"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/frontdoor"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

// startFront runs a front door, wired as the gateway command wires one, on
// the platform's database and ledger and on rdb, in g until ctx ends, and
// returns its base URL. Options.Gateway, then configure, adjust its
// gateway's config last.
func (p *Platform) startFront(ctx context.Context, g *errgroup.Group, rdb redis.UniversalClient, configure ...func(*gateway.Config)) string {
	p.tb.Helper()
	var dispatcher dispatch.Dispatcher
	if p.opts.Engines == nil {
		dispatcher = p.Replicas[0]
	} else {
		direct := frontdoor.NewDirect(p.opts.Engines, p.DB)
		// Before the engines stop (cleanups run last first): a pooled
		// connection that never carried a request counts as active in an
		// engine's graceful shutdown.
		p.tb.Cleanup(direct.CloseIdleConnections)
		dispatcher = direct
	}
	hooks := append([]func(*gateway.Config){p.opts.Gateway}, configure...)
	front, err := frontdoor.Start(ctx, g, frontdoor.Config{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", DB: p.DB,
		Redis: rdb, RedisPrefix: p.Redis.Prefix, Ledger: p.Ledger, Dispatcher: dispatcher, AdminToken: p.opts.AdminToken,
		URLGuard: &urlguard.Guard{AllowUnresolvable: true}, StreamIdleTimeout: p.opts.StreamIdleTimeout,
		FirstTokenTimeout: p.opts.FirstTokenTimeout, RedisTimeout: p.opts.RedisTimeout, QueueLimit: p.opts.QueueLimit,
		WakeHold:          p.opts.WakeHold,
		ProxyProtocolFrom: p.opts.ProxyProtocolFrom, Logger: p.logger, Gateway: func(cfg *gateway.Config) {
			for _, f := range hooks {
				if f != nil {
					f(cfg)
				}
			}
		}})
	if err != nil {
		p.tb.Fatal(err)
	}
	p.Gateways = append(p.Gateways, front.Server)
	return front.Base
}

// StartGateway runs one more gateway on the platform's database, ledger
// and engines, with its own Redis client and key cache as a separate
// process would have, until the test ends, and returns its base URL.
// configure adjusts its config after Options.Gateway.
func (p *Platform) StartGateway(configure ...func(*gateway.Config)) string {
	p.tb.Helper()
	rdb := p.Redis.Client()
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	// Registered after the client, so it runs before the client closes.
	p.tb.Cleanup(func() {
		cancel()
		if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, http.ErrServerClosed) {
			p.tb.Errorf("gateway: %v", err)
		}
	})
	return p.startFront(gctx, g, rdb, configure...)
}

// Settled waits until every gateway has finished the work it does after
// an answer (settles, token counts, queue wake-ups): what a test reads
// next then shows the requests it sent.
func (p *Platform) Settled() {
	for _, gw := range p.Gateways {
		gw.Wait()
	}
}
