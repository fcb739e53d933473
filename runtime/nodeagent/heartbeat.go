package nodeagent

import (
	"context"
	"fmt"
	"time"

	"github.com/llmplat/llmplat/runtime/enginemetrics"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// heartbeatLoop beats once at once, then every welcome interval, until ctx
// ends.
func (s *session) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(s.w.Interval())
	defer t.Stop()
	for {
		s.mu.Lock()
		draining := s.draining
		s.mu.Unlock()
		if !s.send(ctx, s.a.beat(ctx, draining)) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pingLoop pings the server every nodeproto.PingInterval and ends the link
// when a pong takes longer than nodeproto.ReadTimeout (the config's
// pingEvery and pongWithin): the server sends no
// frames while the node is idle, so this is how a half-open link (a server
// gone without a close) is found.
func (s *session) pingLoop(ctx context.Context) error {
	t := time.NewTicker(s.a.cfg.pingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, s.a.cfg.pongWithin)
		err := s.conn.Ping(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("ping: %w", err)
		}
	}
}

// beat builds a heartbeat from the engine's metrics and the GPUs'
// utilisation. A failed scrape beats with the models and drain state only,
// so the server still sees the node.
func (a *Agent) beat(ctx context.Context, draining bool) *nodeproto.Heartbeat {
	hb := &nodeproto.Heartbeat{Models: a.cfg.modelNames(), Draining: draining}
	load, err := enginemetrics.Scrape(ctx, a.cfg.HTTPClient, a.cfg.EngineURL)
	if err != nil {
		if ctx.Err() == nil {
			a.cfg.Logger.Warn("scrape engine metrics", "err", err)
		}
	} else {
		hb.QueueDepth, hb.Running, hb.KVCacheUsage = load.Waiting, load.Running, load.KVCacheUsage
	}
	hb.GPUUtil = a.gpuUtil(ctx)
	return hb
}
