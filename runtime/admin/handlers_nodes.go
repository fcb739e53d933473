package admin

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/credential"
	"github.com/llmplat/llmplat/runtime/openai"
)

// live returns the live view, or nil when there is none or it failed (and
// says which).
func (a *API) live(c *gin.Context) (map[string]adminwire.NodeLive, bool) {
	if a.cfg.Nodes == nil {
		return nil, true
	}
	live, err := a.cfg.Nodes.Live(c.Request.Context())
	if err != nil {
		a.cfg.Logger.Warn("node live view unavailable", "request_id", c.GetString(ctxRequestID), "err", err)
		return nil, false
	}
	return live, true
}

// attachLive sets n.Live from live, when the node is in it.
func attachLive(n *adminwire.Node, live map[string]adminwire.NodeLive) {
	if l, ok := live[n.ID]; ok {
		n.Live = &l
	}
}

// listNodes is GET /admin/nodes: the registered nodes, with live state.
func (a *API) listNodes(c *gin.Context) {
	nodes, err := a.store.ListNodes(c.Request.Context())
	if err != nil {
		a.fail(c, err, "", "node")
		return
	}
	decls, err := a.store.ListNodeDeclarations(c.Request.Context())
	if err != nil {
		a.fail(c, err, "", "node")
		return
	}
	live, ok := a.live(c)
	for i := range nodes {
		attachLive(&nodes[i], live)
		if d, ok := decls[nodes[i].ID]; ok {
			nodes[i].Declared = &d
		}
	}
	writeJSON(c, http.StatusOK, adminwire.NodeList{Data: nodes, LiveUnavailable: !ok})
}

// getNode is GET /admin/nodes/{id}.
func (a *API) getNode(c *gin.Context) {
	id, ok := pathName(c, "id")
	if !ok {
		return
	}
	n, err := a.store.GetNode(c.Request.Context(), id)
	if err != nil {
		a.fail(c, err, "id", "node")
		return
	}
	switch d, err := a.store.GetNodeDeclaration(c.Request.Context(), id); {
	case err == nil:
		n.Declared = &d
	case !errors.Is(err, ErrNotFound):
		a.fail(c, err, "", "node")
		return
	}
	live, _ := a.live(c)
	attachLive(&n, live)
	writeJSON(c, http.StatusOK, n)
}

// putNodeDeclaration is PUT /admin/nodes/{id}/declaration: it stores what
// the operator declared for the node, replacing any declaration, and
// answers it. The node need not have registered yet; a repeat is harmless.
func (a *API) putNodeDeclaration(c *gin.Context) {
	id, ok := pathName(c, "id")
	if !ok {
		return
	}
	var spec adminwire.NodeDeclarationSpec
	if _, ok := decodeBody(c, &spec); !ok {
		return
	}
	if e := validateNodeDeclaration(&spec); e != nil {
		badRequest(c, codeInvalidValue, e)
		return
	}
	d, err := a.store.PutNodeDeclaration(c.Request.Context(), id, spec, a.now())
	if err != nil {
		a.fail(c, err, "", "node")
		return
	}
	writeJSON(c, http.StatusOK, d)
}

// getNodeDeclaration is GET /admin/nodes/{id}/declaration: 404 when none
// was declared (a node whose agent was started by hand).
func (a *API) getNodeDeclaration(c *gin.Context) {
	id, ok := pathName(c, "id")
	if !ok {
		return
	}
	d, err := a.store.GetNodeDeclaration(c.Request.Context(), id)
	if err != nil {
		a.fail(c, err, "id", "node declaration")
		return
	}
	writeJSON(c, http.StatusOK, d)
}

// deleteNodeDeclaration is DELETE /admin/nodes/{id}/declaration: 204,
// also when there was none, so a retry succeeds.
func (a *API) deleteNodeDeclaration(c *gin.Context) {
	id, ok := pathName(c, "id")
	if !ok {
		return
	}
	if err := a.store.DeleteNodeDeclaration(c.Request.Context(), id); err != nil {
		a.fail(c, err, "", "node")
		return
	}
	c.Status(http.StatusNoContent)
}

// drainNode is POST /admin/nodes/{id}/drain: 202 once the drain is sent,
// 501 when no Drainer is configured.
func (a *API) drainNode(c *gin.Context) {
	id, ok := pathName(c, "id")
	if !ok {
		return
	}
	if a.cfg.Drainer == nil {
		writeError(c, http.StatusNotImplemented, openai.TypeServer, codeNotImplemented, "",
			"draining needs the orchestrator, which this server does not run")
		return
	}
	ctx := c.Request.Context()
	if _, err := a.store.GetNode(ctx, id); err != nil {
		a.fail(c, err, "id", "node")
		return
	}
	if err := a.cfg.Drainer.Drain(ctx, id); err != nil {
		if errors.Is(err, ErrNotFound) {
			a.fail(c, err, "id", "node")
			return
		}
		a.cfg.Logger.Warn("drain failed", "request_id", c.GetString(ctxRequestID), "node_id", id, "err", err)
		c.Header("Retry-After", retryAfterUnavailable)
		writeError(c, http.StatusServiceUnavailable, openai.TypeUnavailable, codeUnavailable, "",
			"the drain could not be sent; retry")
		return
	}
	writeJSON(c, http.StatusAccepted, adminwire.DrainResult{NodeID: id, State: "draining"})
}

// issueNodeToken is POST /admin/nodes/{id}/tokens: 201 with the token,
// shown once, or 200 without it for a repeated Idempotency-Key. The
// optional body carries a token the client minted, which is never answered.
// The node need not have registered yet.
func (a *API) issueNodeToken(c *gin.Context) {
	id, ok := pathName(c, "id")
	if !ok {
		return
	}
	idem, ok := idempotencyKey(c)
	if !ok {
		return
	}
	var req adminwire.IssueNodeTokenRequest
	if c.Request.ContentLength != 0 {
		if _, ok := decodeBody(c, &req); !ok {
			return
		}
		if req.Token != "" && !credential.LooksLikeNodeToken(req.Token) {
			badRequest(c, codeInvalidValue, invalid("token",
				"token must be %q followed by 43 base62 characters, as a generated token", credential.NodeTokenPrefix))
			return
		}
	}
	issue := a.tokens.Issue
	if req.Token != "" {
		issue = func(ctx context.Context, nodeID, idemKey string, now time.Time) (adminwire.IssuedNodeToken, error) {
			return a.tokens.IssueMinted(ctx, nodeID, req.Token, idemKey, now)
		}
	}
	out, err := issue(c.Request.Context(), id, idem, a.now())
	if err != nil {
		a.fail(c, err, paramFor(err, "token", adminwire.IdempotencyHeader), "node")
		return
	}
	status := http.StatusCreated
	if out.Replayed {
		status = http.StatusOK
	}
	writeJSON(c, status, out)
}

// listNodeTokens is GET /admin/nodes/{id}/tokens: never a token or hash.
func (a *API) listNodeTokens(c *gin.Context) {
	id, ok := pathName(c, "id")
	if !ok {
		return
	}
	tokens, err := a.tokens.List(c.Request.Context(), id)
	if err != nil {
		a.fail(c, err, "id", "node")
		return
	}
	writeJSON(c, http.StatusOK, adminwire.List[adminwire.NodeToken]{Data: tokens})
}

// revokeNodeToken is DELETE /admin/node-tokens/{token_id}: the token stops
// working at the next registration, and a NodeTokenRevoker closes the live
// socket. A failed close answers 503, and the retry closes again.
func (a *API) revokeNodeToken(c *gin.Context) {
	id, ok := pathID(c, "token_id")
	if !ok {
		return
	}
	ctx := c.Request.Context()
	t, _, err := a.tokens.Revoke(ctx, id, a.now())
	if err != nil {
		a.fail(c, err, "token_id", "node token")
		return
	}
	if a.cfg.NodeTokenRevoker != nil {
		if err := a.cfg.NodeTokenRevoker.RevokeNodeToken(ctx, t.NodeID, t.ID); err != nil {
			a.cfg.Logger.Warn("node token revocation not broadcast", "request_id", c.GetString(ctxRequestID),
				"token_id", id, "err", err)
			c.Header("Retry-After", retryAfterUnavailable)
			writeError(c, http.StatusServiceUnavailable, openai.TypeUnavailable, codeNotPropagated, "",
				"the token is revoked but its node's socket was not closed yet; retry the request")
			return
		}
	}
	writeJSON(c, http.StatusOK, t)
}
