package nodeagent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/llmplat/llmplat/runtime/enginemetrics"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// heartbeatLoop beats once at once, then every welcome interval, and at
// once when a request could not reach the engine (beatNow), until ctx ends.
func (s *session) heartbeatLoop(ctx context.Context) {
	t := s.a.cfg.Clock.NewTicker(s.w.Interval())
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
		case <-t.C():
		case <-s.beatNow:
		}
	}
}

// engineFailed asks for a heartbeat now: a request could not reach the
// engine, and the server should hear at once if the engine is down
// rather than route more requests to it until the next beat. Requests
// that fail together ask once.
func (s *session) engineFailed() {
	select {
	case s.beatNow <- struct{}{}:
	default:
	}
}

// healthTimeout bounds the engine's /health probe: vLLM answers it at
// once, so an engine silent for 2 s is wedged.
const healthTimeout = 2 * time.Second

// probeEngine returns why the engine is down, or "" when its /health
// answers 200 (vLLM: 200 with an empty body when healthy, 503 when the
// engine died; the port may be bound for minutes while a model loads).
func (a *Agent) probeEngine(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.cfg.EngineURL+"/health", nil)
	if err != nil {
		return "health check: " + err.Error()
	}
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "health check: no answer within " + healthTimeout.String()
		}
		return "health check: engine unreachable"
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // so the connection is reused
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("health check: status %d", resp.StatusCode)
	}
	return ""
}

// pingLoop pings the server every nodeproto.PingInterval and ends the link
// when a pong takes longer than nodeproto.ReadTimeout (the config's
// pingEvery and pongWithin): the server sends no
// frames while the node is idle, so this is how a half-open link (a server
// gone without a close) is found.
func (s *session) pingLoop(ctx context.Context) error {
	t := s.a.cfg.Clock.NewTicker(s.a.cfg.pingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
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
	hb := &nodeproto.Heartbeat{Models: a.cfg.modelNames(), Draining: draining, EngineDown: a.probeEngine(ctx)}
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
