package orchestrator

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/llmplat/llmplat/runtime/wsconn"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/registry"
)

// ConnectPath is where nodes dial in.
const ConnectPath = "/v1/nodes/connect"

// shutdownRetryAfter is the wait a replica that is going away advises a
// node that dials it: another replica will be up by then.
const shutdownRetryAfter = 5

// accept serves one node socket from upgrade to close.
func (o *Orchestrator) accept(w http.ResponseWriter, r *http.Request) {
	ws, err := wsconn.Accept(w, r)
	if err != nil {
		return // Accept answered the client
	}
	handedOff := false
	defer func() {
		if !handedOff {
			_ = ws.CloseNow()
		}
	}()
	ws.SetReadLimit(nodeproto.ServerReadLimit)
	ctx := r.Context()
	reg, err := o.readRegister(ctx, ws)
	if err != nil {
		o.cfg.Metrics.registrations.WithLabelValues("invalid").Inc()
		code := wsconn.StatusProtocolError
		if cc, ok := nodeproto.CloseCodeOf(err); ok {
			code = wsconn.StatusCode(cc)
		}
		_ = ws.Close(code, "first frame must be a valid register")
		return
	}
	log := o.cfg.Logger.With("node_id", reg.NodeID)
	if o.closing.Load() {
		o.refuse(ctx, ws, "shutdown", &nodeproto.RetryAfter{Seconds: shutdownRetryAfter, Reason: "replica going away"})
		return
	}
	// The token is checked before anything is counted: junk registrations
	// spend neither the cluster-wide rate nor the node's own allowance,
	// and only a bad token counts against its address, so a valid token
	// is never refused for what others behind the same address (a NAT)
	// sent. A token refused moments ago is refused again from memory.
	if err := o.verifyToken(ctx, reg); err != nil {
		o.refuseToken(ctx, ws, log, remoteHost(r), err)
		return
	}
	// One node registering in a loop spends its own allowance, not the
	// cluster-wide rate every other node needs.
	ok, wait, err := o.cfg.Registry.AllowNodeRegistration(ctx, reg.NodeID, nodeRegistrationsPerWindow, nodeRegistrationWindow)
	if err != nil {
		log.Warn("node registration count failed", "err", err)
		o.refuse(ctx, ws, "unavailable", &nodeproto.RetryAfter{Seconds: shutdownRetryAfter, Reason: "registry unavailable"})
		return
	}
	if !ok {
		o.refuse(ctx, ws, "node_rate_limited", &nodeproto.RetryAfter{Seconds: ceilSeconds(wait), Reason: "registrations of this node"})
		return
	}
	// A node token registers an on-prem node only: requests reach it over
	// its own socket. Cloud nodes, which get requests over HTTP at a URL,
	// come from the cluster or the operator's configuration; a URL chosen
	// by a node would have the orchestrator post users' prompts wherever
	// it points, inside the cluster included.
	if reg.Location != nodeproto.LocationOnPrem || reg.ServiceURL != "" {
		log.Warn("node token used to register a cloud node; refused", "location", string(reg.Location), "source", remoteHost(r))
		o.refuse(ctx, ws, "cloud_refused", &nodeproto.Error{Status: http.StatusForbidden, Message: errCloudRegistration})
		return
	}
	var admitted time.Time
	ok, wait, admitted, err = o.cfg.Registry.AllowRegistrationAt(ctx, o.cfg.RegistrationsPerSecond)
	if err != nil {
		log.Warn("registration rate check failed", "err", err)
		o.refuse(ctx, ws, "unavailable", &nodeproto.RetryAfter{Seconds: shutdownRetryAfter, Reason: "registry unavailable"})
		return
	}
	if !ok {
		o.refuse(ctx, ws, "rate_limited", &nodeproto.RetryAfter{Seconds: ceilSeconds(wait), Reason: "registration rate"})
		return
	}
	// The socket outlives this handler: once registered it is served by
	// goroutines of its own, so the HTTP server's connection state (its
	// buffers, the request) is freed; the orchestrator ends it (shutdown,
	// supersession, revocation), not the request's context.
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	c, state, err := o.register(ctx, ws, reg, admitted, cancel)
	if err != nil {
		cancel(nil)
		log.Error("registration failed", "err", err)
		o.refuse(ctx, ws, "unavailable", &nodeproto.RetryAfter{Seconds: shutdownRetryAfter, Reason: "registration failed"})
		return
	}
	o.cfg.Metrics.registrations.WithLabelValues("accepted").Inc()
	if c.epoch > 1 {
		o.cfg.Metrics.reconnects.Inc()
	}
	log.Info("node registered", "epoch", c.epoch, "models", len(reg.Models))
	c.send(&nodeproto.Welcome{Epoch: c.epoch, HeartbeatInterval: int(nodeproto.HeartbeatInterval / time.Second),
		Window: o.cfg.Window, OrchestratorID: o.cfg.ID, Version: o.cfg.Version})
	if state == stateDraining {
		c.drain(0)
		o.markDraining(ctx, c)
	}
	handedOff = true
	o.sockets.Add(1)
	go func() {
		defer o.sockets.Done()
		defer ws.CloseNow()
		defer cancel(nil)
		err := o.serveConn(cctx, c)
		log.Info("node connection ended", "epoch", c.epoch, "cause", err)
	}()
}

// readRegister reads and validates the first frame.
func (o *Orchestrator) readRegister(ctx context.Context, ws *wsconn.Conn) (*nodeproto.Register, error) {
	rctx, cancel := context.WithTimeout(ctx, nodeproto.RegisterTimeout)
	defer cancel()
	msg, err := ws.Read(rctx)
	if err != nil {
		return nil, fmt.Errorf("read register: %w", err)
	}
	f, err := nodeproto.Decode(o.validText(msg))
	if err != nil {
		return nil, fmt.Errorf("decode register: %w", err)
	}
	reg, ok := f.(*nodeproto.Register)
	if !ok {
		return nil, fmt.Errorf("%w: first frame is %s", nodeproto.ErrInvalid, f.Type())
	}
	return reg, nil
}

// errCloudRegistration is the refusal of a registration that claims a
// cloud location or a service URL; short enough to be a close reason.
const errCloudRegistration = "node tokens register on-prem nodes only"

// maxCloseReason is the longest close reason a close frame carries (RFC
// 6455: 125 bytes of payload, 2 of them the code).
const maxCloseReason = 123

// refuse answers a registration with f (retry_after or error) and closes
// with the matching code; an error's message is the close reason too.
func (o *Orchestrator) refuse(ctx context.Context, ws *wsconn.Conn, reason string, f nodeproto.Frame) {
	o.cfg.Metrics.registrations.WithLabelValues(reason).Inc()
	code, text := wsconn.StatusTryAgainLater, "try again later"
	if e, isErr := f.(*nodeproto.Error); isErr {
		code, text = wsconn.StatusPolicyViolation, "registration refused"
		if len(e.Message) <= maxCloseReason {
			text = e.Message
		}
	}
	if b, err := nodeproto.Encode(f); err == nil {
		wctx, cancel := context.WithTimeout(ctx, nodeproto.WriteTimeout)
		_ = ws.Write(wctx, b)
		cancel()
	}
	_ = ws.Close(code, text)
}

// register records the registration (admitted is the Redis time the rate
// limit counted it at), claims the node's record under a new
// epoch and makes the connection the node's current one on this replica.
// It returns the node's durable state ("draining" survives a reconnect).
func (o *Orchestrator) register(ctx context.Context, ws *wsconn.Conn, reg *nodeproto.Register, admitted time.Time, cancel context.CancelCauseFunc) (*nodeConn, string, error) {
	rec := recordOf(reg, o.cfg.ID)
	state := stateActive
	if o.cfg.Events != nil {
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		var err error
		state, err = o.cfg.Events.Registered(sctx, rec, admitted)
		cancel()
		if err != nil {
			return nil, "", err
		}
	}
	epoch, err := o.cfg.Registry.Register(ctx, rec)
	if err != nil {
		return nil, "", fmt.Errorf("claim node record: %w", err)
	}
	c := newNodeConn(o, ws, rec, epoch, reg.Token, cancel)
	return c, state, nil
}

// recordOf is the registry record of a registration: always an on-prem
// node, reached over its socket (accept refuses any other).
func recordOf(reg *nodeproto.Register, owner string) registry.NodeRecord {
	rec := registry.NodeRecord{ID: reg.NodeID, Owner: owner, Location: registry.LocationOnPrem, Version: reg.Version}
	for _, g := range reg.GPUs {
		rec.GPUs = append(rec.GPUs, registry.GPU{Index: g.Index, Name: g.Name, MemoryBytes: g.MemoryBytes})
	}
	for _, m := range reg.Models {
		rec.Models = append(rec.Models, registry.ModelSlot{Name: m.Name, ServedName: m.ServedName,
			MaxNumSeqs: m.MaxNumSeqs, MaxModelLen: m.MaxModelLen, KVCapacityTokens: m.KVCapacityTokens})
	}
	return rec
}

// refuseToken answers a registration whose token did not verify: 401 for
// a bad or revoked token, or retry_after once its address has sent
// sourceBadPerWindow bad ones in sourceWindow (logged once, not per
// attempt); a token store that did not answer gets retry_after.
func (o *Orchestrator) refuseToken(ctx context.Context, ws *wsconn.Conn, log *slog.Logger, source string, err error) {
	if !errors.Is(err, admin.ErrInvalidNodeToken) {
		log.Warn("node token check failed", "err", err)
		o.refuse(ctx, ws, "unavailable", &nodeproto.RetryAfter{Seconds: shutdownRetryAfter, Reason: "token store unavailable"})
		return
	}
	n, rest := o.badTokens.failed(source, o.cfg.Clock.Now())
	switch {
	case n > sourceBadPerWindow:
		o.refuse(ctx, ws, "source_limited", &nodeproto.RetryAfter{Seconds: ceilSeconds(rest), Reason: "too many bad registrations from this address"})
		return
	case n == sourceBadPerWindow:
		log.Warn("node token refused; further bad registrations from this address are not logged until its window ends",
			"err", err, "source", source, "window", sourceWindow)
	default:
		log.Warn("node token refused", "err", err, "source", source)
	}
	msg := "node token invalid"
	if errors.Is(err, admin.ErrNodeTokenRevoked) {
		msg = "node token revoked"
	}
	o.refuse(ctx, ws, "bad_token", &nodeproto.Error{Status: http.StatusUnauthorized, Message: msg})
}

// ceilSeconds is a wait in whole seconds, at least 1 (retry_after's floor).
func ceilSeconds(d time.Duration) int {
	return max(int(math.Ceil(d.Seconds())), 1)
}

// verifyToken checks a registration's token, answering from the negative
// cache when the same token was refused moments ago.
func (o *Orchestrator) verifyToken(ctx context.Context, reg *nodeproto.Register) error {
	key := tokenKey(reg.NodeID, string(reg.Token))
	now := o.cfg.Clock.Now()
	if o.badTokens.refusedLately(key, now) {
		return fmt.Errorf("%w: refused moments ago", admin.ErrInvalidNodeToken)
	}
	err := o.cfg.Tokens.Verify(ctx, reg.NodeID, string(reg.Token))
	if errors.Is(err, admin.ErrInvalidNodeToken) {
		o.badTokens.remember(key, now)
	}
	return err
}

// remoteHost is the address a registration came from, without its port.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// tokenKey names a node id and token pair without keeping the token.
func tokenKey(nodeID, token string) string {
	sum := sha256.Sum256([]byte(nodeID + "\x00" + token))
	return string(sum[:16])
}
