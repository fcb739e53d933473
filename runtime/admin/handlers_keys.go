package admin

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/openai"
)

// withStatus sets k's status at the API's clock.
func (a *API) withStatus(k adminwire.Key) adminwire.Key {
	k.Status = k.StatusAt(a.now())
	return k
}

// idempotencyKey reads and checks the Idempotency-Key header; on failure it
// has answered 400.
func idempotencyKey(c *gin.Context) (string, bool) {
	k := c.GetHeader(adminwire.IdempotencyHeader)
	if e := checkIdempotencyKey(adminwire.IdempotencyHeader, k); e != nil {
		badRequest(c, codeInvalidValue, e)
		return "", false
	}
	return k, true
}

// createKey is POST /admin/keys: 201 with the secret, or 200 without it
// when the Idempotency-Key was seen before (rotated to the repeat's secret
// when it supplies another; see SQLStore.CreateKey).
func (a *API) createKey(c *gin.Context) {
	idem, ok := idempotencyKey(c)
	if !ok {
		return
	}
	var req adminwire.CreateKeyRequest
	if _, ok := decodeBody(c, &req); !ok {
		return
	}
	if e := validateCreateKey(&req, a.now()); e != nil {
		badRequest(c, codeInvalidValue, e)
		return
	}
	out, err := a.store.CreateKeyBy(c.Request.Context(), req, idem, a.subject(c), a.now())
	if err != nil {
		a.fail(c, err, paramFor(err, "team_id", adminwire.IdempotencyHeader), "team")
		return
	}
	if out.Rotated {
		a.evict(c, out.ID, "retake")
	}
	out.Key = a.withStatus(out.Key)
	status := http.StatusCreated
	if out.Replayed {
		status = http.StatusOK
	}
	writeJSON(c, status, out)
}

// paramFor names the field at fault: idemParam for an idempotency
// conflict, otherwise param.
func paramFor(err error, param, idemParam string) string {
	if isIdempotencyConflict(err) {
		return idemParam
	}
	return param
}

// listKeys is GET /admin/keys[?team_id=].
func (a *API) listKeys(c *gin.Context) {
	var teamID int64
	if s := c.Query("team_id"); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			badRequest(c, codeInvalidValue, invalid("team_id", "team_id must be a positive integer"))
			return
		}
		teamID = id
	}
	keys, err := a.store.ListKeys(c.Request.Context(), teamID)
	if err != nil {
		a.fail(c, err, "team_id", "team")
		return
	}
	for i := range keys {
		keys[i] = a.withStatus(keys[i])
	}
	writeJSON(c, http.StatusOK, adminwire.List[adminwire.Key]{Data: keys})
}

// getKey is GET /admin/keys/{id}.
func (a *API) getKey(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	k, err := a.store.GetKey(c.Request.Context(), id)
	if err != nil {
		a.fail(c, err, "id", "api key")
		return
	}
	writeJSON(c, http.StatusOK, a.withStatus(k))
}

// updateKey is PATCH /admin/keys/{id}. The gateways' caches drop the key
// afterwards, so new limits apply within seconds.
func (a *API) updateKey(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var req adminwire.UpdateKeyRequest
	if _, ok := decodeBody(c, &req); !ok {
		return
	}
	if e := validateUpdateKey(&req); e != nil {
		badRequest(c, codeInvalidValue, e)
		return
	}
	ctx := c.Request.Context()
	k, err := a.store.UpdateKey(ctx, id, req)
	if err != nil {
		a.fail(c, err, "id", "api key")
		return
	}
	a.evict(c, id, "update")
	writeJSON(c, http.StatusOK, a.withStatus(k))
}

// rotateKey is POST /admin/keys/{id}/rotate: a new secret, shown once, for
// the same id and limits. The old secret is refused from the commit on;
// gateways that cached it drop it within seconds (the Revoker), and within
// the key cache's TTL if that broadcast fails.
func (a *API) rotateKey(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	// The body is optional: a client-minted secret, or none.
	var req adminwire.RotateKeyRequest
	if c.Request.ContentLength != 0 {
		if _, ok := decodeBody(c, &req); !ok {
			return
		}
		if e := checkSuppliedKey(req.Key); e != nil {
			badRequest(c, codeInvalidValue, e)
			return
		}
	}
	out, err := a.store.RotateKey(c.Request.Context(), id, req.Key)
	if err != nil {
		a.fail(c, err, "id", "api key")
		return
	}
	a.evict(c, id, "rotate")
	out.Key = a.withStatus(out.Key)
	writeJSON(c, http.StatusOK, out)
}

// forgetKeyCreate is DELETE /admin/keys/{id}/idempotency-key: the client
// has kept the key's secret, so a repeat of its create must not take the
// key over any more (see SQLStore.ForgetKeyCreate). Forgetting again
// changes nothing.
func (a *API) forgetKeyCreate(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	k, err := a.store.ForgetKeyCreate(c.Request.Context(), id)
	if err != nil {
		a.fail(c, err, "id", "api key")
		return
	}
	writeJSON(c, http.StatusOK, a.withStatus(k))
}

// revokeKey is DELETE /admin/keys/{id}: sets revoked_at, then tells every
// gateway. A failed broadcast answers 503, and the retry (revoking is
// idempotent) broadcasts again.
func (a *API) revokeKey(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	ctx := c.Request.Context()
	k, err := a.store.RevokeKeyBy(ctx, id, a.subject(c), a.now())
	if err != nil {
		a.fail(c, err, "id", "api key")
		return
	}
	if a.cfg.Revoker != nil {
		if err := a.cfg.Revoker.RevokeKeyID(ctx, id); err != nil {
			a.cfg.Logger.Warn("key revocation not broadcast", "request_id", c.GetString(ctxRequestID), "key_id", id, "err", err)
			c.Header("Retry-After", retryAfterUnavailable)
			writeError(c, http.StatusServiceUnavailable, openai.TypeUnavailable, codeNotPropagated, "",
				"the key is revoked but the gateways were not told yet; retry the request")
			return
		}
	}
	writeJSON(c, http.StatusOK, a.withStatus(k))
}

// evict drops key id from the gateways' caches after a committed change; a
// failure is logged, since the cache's TTL bounds the staleness.
func (a *API) evict(c *gin.Context, id int64, op string) {
	if a.cfg.Revoker == nil {
		return
	}
	if err := a.cfg.Revoker.RevokeKeyID(c.Request.Context(), id); err != nil {
		a.cfg.Logger.Warn("key cache eviction not broadcast", "request_id", c.GetString(ctxRequestID),
			"op", op, "key_id", id, "err", err)
	}
}

// subject names the admin credential of the request, as the audit list
// shows who made or revoked a key: "admin API (<subject>)".
func (a *API) subject(c *gin.Context) string {
	p, _ := c.Get(ctxPrincipal)
	sub := ""
	if p, ok := p.(auth.Principal); ok {
		sub = p.Subject
	}
	return "admin API (" + sub + ")"
}
