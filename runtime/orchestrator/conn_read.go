package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"unicode/utf8"

	"github.com/llmplat/llmplat/runtime/hoptrace"
	"github.com/llmplat/llmplat/runtime/wsconn"

	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/registry"
)

// readLoop reads the node's frames until the link ends. After two
// heartbeat intervals of silence the requests the node sent nothing for
// are retried elsewhere (watchSilence); a read that sees nothing for
// ReadTimeout (three heartbeats) drops a half-open link.
func (c *nodeConn) readLoop(ctx context.Context) error {
	c.watchSilence(ctx)
	for {
		rctx, cancel := context.WithTimeout(ctx, nodeproto.ReadTimeout)
		msg, err := c.ws.Read(rctx)
		cancel()
		if err == nil {
			c.heard.Store(c.o.cfg.Clock.Now().UnixNano())
			msg = c.o.validText(msg)
		}
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if wsconn.CloseStatus(err) == wsconn.StatusNormalClosure {
				return errNodeClosed
			}
			return fmt.Errorf("read: %w", err)
		}
		f, err := nodeproto.Decode(msg)
		if errors.Is(err, nodeproto.ErrUnknownType) {
			c.o.cfg.Metrics.unknownFrames.Inc()
			continue
		}
		if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if err := c.handle(ctx, f); err != nil {
			return err
		}
	}
}

// handle acts on one frame from the node; an error ends the connection.
func (c *nodeConn) handle(ctx context.Context, f nodeproto.Frame) error {
	switch f := f.(type) {
	case *nodeproto.Chunk:
		s := c.take(f.RequestID, false)
		if s == nil {
			return nil // cancelled: the node stops within its credit
		}
		var frame nodeproto.Frame = f
		first := false
		if rs, ok := s.(*reqStream); ok {
			if ev, ok := rs.early(f); ok {
				frame, first = &readChunk{Chunk: f, ev: ev}, rs.firstOutput(&ev)
			}
		}
		if !s.push(frame) {
			return fmt.Errorf("%w: %w for request %s", nodeproto.ErrInvalid, errCredit, f.RequestID)
		}
		if first {
			if hoptrace.On {
				hoptrace.Mark(f.RequestID, hoptrace.ChunkRead)
			}
			// First tokens first: the request's consumer, waiting for the
			// token its client measures, runs now rather than after the
			// consumers of every other chunk in this read (a decode step
			// brings one for every stream on the node). This loop goes
			// on from the global run queue: at once where a processor is
			// idle, else once this one's queue is through.
			runtime.Gosched()
		}
	case *nodeproto.Done:
		s := c.take(f.RequestID, true)
		if s != nil && !s.push(f) {
			s.fail(fmt.Errorf("%w: done lost in a full buffer", errCredit))
		}
		if s != nil && c.rec.Location == registry.LocationOnPrem {
			// Counted once: a done replayed after a reconnect or a
			// cancel finds no stream.
			c.o.cfg.Metrics.onPremCompleted(f.CompletionTokens)
		}
		c.o.recordDone(c, f, s != nil) // and acknowledged once recorded
	case *nodeproto.Error:
		if f.RequestID == "" {
			c.o.cfg.Logger.Warn("node reported a connection error", "node_id", c.rec.ID, "status", f.Status, "message", f.Message)
			return nil
		}
		if s := c.take(f.RequestID, true); s != nil && !s.push(f) {
			s.fail(fmt.Errorf("%w: error lost in a full buffer", errCredit))
		}
	case *nodeproto.Heartbeat:
		c.beat(ctx, f)
	case *nodeproto.Register:
		return fmt.Errorf("%w: register on a registered connection", nodeproto.ErrInvalid)
	default:
		c.o.cfg.Logger.Warn("unexpected frame from node", "node_id", c.rec.ID, "type", f.Type())
	}
	return nil
}

// beat writes a heartbeat to the registry under this connection's epoch.
// A refused write means a newer connection of the node took over: this
// one finishes its requests and closes.
func (c *nodeConn) beat(ctx context.Context, hb *nodeproto.Heartbeat) {
	rhb := registry.Heartbeat{QueueDepth: hb.QueueDepth, Running: hb.Running, GPUUtil: hb.GPUUtil, EngineDown: hb.EngineDown}
	if hb.KVCacheUsage != nil {
		rhb.KVCacheUsage = min(max(*hb.KVCacheUsage, 0), 1)
	}
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	ok, err := c.o.cfg.Registry.Heartbeat(rctx, c.rec.ID, c.epoch, rhb)
	if ok && hb.Draining && c.nodeDraining() {
		// The node drains on its own (its pod is going away): no new work
		// here, and none from any replica once the registry says so.
		c.o.cfg.Logger.Info("node is draining itself", "node_id", c.rec.ID, "epoch", c.epoch)
		c.o.markDraining(ctx, c)
	}
	switch {
	case err != nil:
		if ctx.Err() == nil {
			c.o.cfg.Logger.Warn("heartbeat not recorded", "node_id", c.rec.ID, "err", err)
		}
	case !ok && c.recordLost(ctx):
		// Nothing replaced this connection: the record expired, or Redis
		// lost it (a restart without persistence). The node is told to
		// register again on a new connection now, while this one carries
		// its requests to their end; waiting for them first would keep the
		// node out of routing for as long as its longest stream.
		c.mu.Lock()
		first := !c.leaving
		c.mu.Unlock()
		if first {
			c.o.cfg.Logger.Warn("node record lost; asking the node to register again", "node_id", c.rec.ID, "epoch", c.epoch)
			c.send(&nodeproto.Reconnect{AfterMS: 0, Reason: "node record lost"})
		}
		c.leave(errRecordLost)
	case !ok:
		c.o.cfg.Logger.Info("connection superseded", "node_id", c.rec.ID, "epoch", c.epoch)
		c.leave(errSuperseded)
	case hb.EngineDown != c.engineDown:
		// The engine went down or came back: route by it now, not at
		// the next snapshot refresh.
		if hb.EngineDown != "" {
			c.o.cfg.Logger.Warn("node's engine is down; out of routing", "node_id", c.rec.ID, "reason", hb.EngineDown)
		} else {
			c.o.cfg.Logger.Info("node's engine is up again", "node_id", c.rec.ID)
		}
		c.engineDown = hb.EngineDown
		c.o.refreshNow()
	}
}

// errRecordLost ends a connection whose node record vanished; the node
// registers again on a new one, which supersedes it.
var errRecordLost = fmt.Errorf("%w: the node record was lost", errSuperseded)

// recordLost reports whether the node has no record at all (as opposed to
// a newer connection's record).
func (c *nodeConn) recordLost(ctx context.Context) bool {
	gctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	_, err := c.o.cfg.Registry.Get(gctx, c.rec.ID)
	return errors.Is(err, registry.ErrNotFound)
}

// nodeDraining marks the connection draining because the node said so,
// and reports whether it was not already.
func (c *nodeConn) nodeDraining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.draining
	c.draining = true
	return !was
}

// validText returns a node's text frame as valid UTF-8. RFC 6455 requires
// it of a text frame, and a frame's strings reach clients (a chunk's delta
// byte for byte), whose strict JSON parsers fail on invalid bytes. Each
// run of invalid bytes becomes U+FFFD, as the node agent does with an
// engine's; inside a JSON string that keeps the frame valid JSON, and
// outside one the frame was not JSON anyway. A valid frame, nearly every
// one, costs one pass and no copy.
func (o *Orchestrator) validText(msg []byte) []byte {
	if utf8.Valid(msg) {
		return msg
	}
	o.cfg.Metrics.invalidText.Inc()
	return bytes.ToValidUTF8(msg, []byte("\uFFFD"))
}
