package nodeagent

import (
	"context"
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
