package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"k8s.io/utils/clock"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/store"
)

// requestTimeout bounds one admin call: each touches a few rows, so a call
// still running after this is stuck on the database and gets a 503 the
// client retries, instead of holding the connection.
const requestTimeout = 10 * time.Second

// retryAfterUnavailable is the Retry-After of a 503: a database or Redis
// blip lasts about a second.
const retryAfterUnavailable = "1"

// Ledger is the part of the ledger the admin API uses; *ledger.Ledger
// implements it.
type Ledger interface {
	// AddCredit grants amountMicro to the team once per idempotencyKey.
	AddCredit(ctx context.Context, teamID int64, idempotencyKey string, amountMicro int64, note string) (ledger.Credit, error)
	// Credit returns the credit entry with id, or ledger.ErrNotFound.
	Credit(ctx context.Context, id int64) (ledger.Credit, error)
	// Balance returns the team's balance, open reservations and the rest.
	Balance(ctx context.Context, teamID int64) (ledger.Balance, error)
}

var _ Ledger = (*ledger.Ledger)(nil)

// Revoker drops a key from every gateway replica's key cache, so that a
// revocation, rotation or change of limits takes effect within seconds;
// *auth.KeyCache implements it. The API calls it after the commit.
type Revoker interface {
	RevokeKeyID(ctx context.Context, id int64) error
}

var _ Revoker = (*auth.KeyCache)(nil)

// NodeTokenRevoker closes the live socket of a node whose token was
// revoked; the orchestrator implements it. The API calls it after the
// commit.
type NodeTokenRevoker interface {
	RevokeNodeToken(ctx context.Context, nodeID string, tokenID int64) error
}

// NodeView reports the live state of nodes by id, from the heartbeats the
// orchestrator keeps in Redis.
type NodeView interface {
	Live(ctx context.Context) (map[string]adminwire.NodeLive, error)
}

// Drainer stops new work for a node and lets its streams finish. It wraps
// ErrNodeNotFound for a node it does not know.
type Drainer interface {
	Drain(ctx context.Context, nodeID string) error
}

// Config is what the admin API needs. DB, Ledger and Authenticate are
// required; a nil optional part turns its feature off.
type Config struct {
	// DB is the migrated platform database.
	DB *store.DB
	// Ledger grants credit and reports balances.
	Ledger Ledger
	// Authenticate verifies the Authorization header, as
	// (*auth.Authenticator).Authenticate does. Only admin principals pass.
	Authenticate func(ctx context.Context, authorization string) (auth.Principal, error)
	// Revoker, optional, evicts keys from the gateways' caches; without it
	// (one process, no cache) changes apply at the next lookup.
	Revoker Revoker
	// NodeTokenRevoker, optional, closes the socket of a node whose token
	// was revoked; without it the token stops working at the next
	// registration.
	NodeTokenRevoker NodeTokenRevoker
	// Nodes, optional, adds live state to the nodes view.
	Nodes NodeView
	// Drainer, optional, drains nodes; without it drain answers 501.
	Drainer Drainer
	// Clock stamps what the API writes and checks expiries; nil means the
	// real clock.
	Clock clock.PassiveClock
	// Logger gets one line per request (never a body, credential or
	// secret); nil means slog.Default().
	Logger *slog.Logger
}

// API is the admin HTTP API.
type API struct {
	cfg    Config
	store  *SQLStore
	tokens *SQLNodeTokens
}

// New returns the admin API for cfg.
func New(cfg Config) (*API, error) {
	switch {
	case cfg.DB == nil:
		return nil, errors.New("admin: a database is required")
	case cfg.Ledger == nil:
		return nil, errors.New("admin: a ledger is required")
	case cfg.Authenticate == nil:
		return nil, errors.New("admin: an authenticate function is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &API{cfg: cfg, store: NewSQLStore(cfg.DB), tokens: NewSQLNodeTokens(cfg.DB)}, nil
}

// now is the clock in UTC at microsecond precision, which both dialects
// store exactly.
func (a *API) now() time.Time { return a.cfg.Clock.Now().UTC().Truncate(time.Microsecond) }

// Register mounts the API under /admin on r.
func (a *API) Register(r gin.IRouter) {
	g := r.Group("/admin", a.logRequest, a.requireAdmin, limitRequest)
	g.POST("/teams", a.createTeam)
	g.GET("/teams", a.listTeams)
	g.GET("/teams/:id", a.getTeam)
	g.PATCH("/teams/:id", a.updateTeam)
	g.POST("/teams/:id/release", a.releaseTeam)
	g.POST("/credits", a.addCredit)
	g.GET("/credits/:id", a.getCredit)
	g.POST("/keys", a.createKey)
	g.GET("/keys", a.listKeys)
	g.GET("/keys/:id", a.getKey)
	g.PATCH("/keys/:id", a.updateKey)
	g.POST("/keys/:id/rotate", a.rotateKey)
	g.DELETE("/keys/:id", a.revokeKey)
	g.DELETE("/keys/:id/idempotency-key", a.forgetKeyCreate)
	g.PUT("/models/:name", a.putModel)
	g.GET("/models", a.listModels)
	g.GET("/models/:name", a.getModel)
	g.DELETE("/models/:name", a.deleteModel)
	g.GET("/nodes", a.listNodes)
	g.GET("/nodes/:id", a.getNode)
	g.POST("/nodes/:id/drain", a.drainNode)
	g.PUT("/nodes/:id/declaration", a.putNodeDeclaration)
	g.GET("/nodes/:id/declaration", a.getNodeDeclaration)
	g.DELETE("/nodes/:id/declaration", a.deleteNodeDeclaration)
	g.POST("/nodes/:id/tokens", a.issueNodeToken)
	g.GET("/nodes/:id/tokens", a.listNodeTokens)
	g.DELETE("/node-tokens/:token_id", a.revokeNodeToken)
}

// Handler returns the API as a standalone handler, with OpenAI-shaped 404
// and 405 answers for unknown routes.
func (a *API) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.Use(gin.CustomRecovery(func(c *gin.Context, p any) {
		a.cfg.Logger.Error("admin handler panic", "request_id", c.GetString(ctxRequestID), "panic", p)
		writeError(c, http.StatusInternalServerError, openai.TypeServer, codeInternal, "", "internal error")
	}))
	e.NoRoute(func(c *gin.Context) {
		writeError(c, http.StatusNotFound, openai.TypeNotFound, codeNotFound, "", "no route for "+c.Request.Method+" "+c.Request.URL.Path)
	})
	e.NoMethod(func(c *gin.Context) {
		writeError(c, http.StatusMethodNotAllowed, openai.TypeInvalidRequest, codeMethodForbidden, "", "method not allowed")
	})
	a.Register(e)
	return e
}

// ctxRequestID and ctxPrincipal are gin context keys.
const (
	ctxRequestID = "admin_request_id"
	ctxPrincipal = "admin_principal"
)

// logRequest gives the request an id (x-request-id), unless a server it is
// mounted on already did, and logs one line when it ends: the route
// pattern and status, never a body, credential or secret.
func (a *API) logRequest(c *gin.Context) {
	id := c.Writer.Header().Get("X-Request-Id")
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
		id = "req_" + hex.EncodeToString(b[:])
		c.Header("X-Request-Id", id)
	}
	c.Set(ctxRequestID, id)
	start := time.Now()
	c.Next()
	p, _ := c.Get(ctxPrincipal)
	subject := ""
	if p, ok := p.(auth.Principal); ok {
		subject = p.Subject
	}
	a.cfg.Logger.Info("admin request", "request_id", id, "method", c.Request.Method, "route", c.FullPath(),
		"status", c.Writer.Status(), "admin", subject, "duration", time.Since(start))
}

// requireAdmin answers 401 without a valid credential and 403 for a
// principal that is not an admin, before any body is read.
func (a *API) requireAdmin(c *gin.Context) {
	p, err := a.cfg.Authenticate(c.Request.Context(), c.GetHeader("Authorization"))
	switch {
	case errors.Is(err, auth.ErrUnavailable):
		c.Header("Retry-After", retryAfterUnavailable)
		writeError(c, http.StatusServiceUnavailable, openai.TypeUnavailable, codeUnavailable, "",
			"the credential could not be checked; retry")
		return
	case err != nil:
		code, msg := authFailure(err)
		c.Header("WWW-Authenticate", `Bearer realm="llmplat-admin"`)
		writeError(c, http.StatusUnauthorized, openai.TypeAuthentication, code, "", msg)
		return
	case !p.IsAdmin():
		writeError(c, http.StatusForbidden, openai.TypePermission, codeAdminRequired, "",
			"the admin api requires an admin role")
		return
	}
	c.Set(ctxPrincipal, p)
	c.Next()
}

// authFailure is the code and message of a 401, with the gateway's codes.
func authFailure(err error) (code, msg string) {
	switch {
	case errors.Is(err, auth.ErrMissingCredential):
		return codeMissingAPIKey, "no credential: send Authorization: Bearer <admin token or JWT>"
	case errors.Is(err, auth.ErrExpired):
		return codeExpiredAPIKey, "the credential has expired"
	case errors.Is(err, auth.ErrRevoked):
		return codeRevokedAPIKey, "the credential has been revoked"
	}
	return codeInvalidAPIKey, "the credential is not valid"
}

// limitRequest bounds the body and the time of a call.
func limitRequest(c *gin.Context) {
	if c.Request.ContentLength > maxBodyBytes {
		writeError(c, http.StatusRequestEntityTooLarge, openai.TypeInvalidRequest, codeTooLarge, "",
			"request body exceeds the admin api's limit")
		return
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxBodyBytes)
	ctx, cancel := context.WithTimeout(c.Request.Context(), requestTimeout)
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	c.Next()
}

// codeBalanceRange is the 409 of a credit that would take a balance past
// ledger.MaxBalance.
const codeBalanceRange = "balance_out_of_range"

// fail answers an error from a store, the ledger or a hook; param names
// the field at fault and what the resource a 404 is about.
func (a *API) fail(c *gin.Context, err error, param, what string) {
	switch {
	case errors.Is(err, ErrIdempotencyConflict), errors.Is(err, ledger.ErrIdempotencyConflict):
		writeError(c, http.StatusConflict, openai.TypeInvalidRequest, codeIdempotency, param,
			"the idempotency key was already used for a different request")
	case errors.Is(err, ErrAlreadyExists):
		writeError(c, http.StatusConflict, openai.TypeInvalidRequest, adminwire.CodeAlreadyExists, "name",
			"the platform already has a "+what+" of that name: import it to manage it")
	case errors.Is(err, ErrNameTaken):
		writeError(c, http.StatusConflict, openai.TypeInvalidRequest, codeConflict, "name", "another team has that name")
	case errors.Is(err, ErrKeyRevoked):
		writeError(c, http.StatusConflict, openai.TypeInvalidRequest, codeKeyRevoked, "", "the api key is revoked")
	case errors.Is(err, ErrKeyInUse):
		writeError(c, http.StatusConflict, openai.TypeInvalidRequest, codeConflict, "key", "that key secret is already in use: mint a new one")
	case errors.Is(err, ErrNodeTokenInUse):
		writeError(c, http.StatusConflict, openai.TypeInvalidRequest, codeConflict, "token", "that node token is already issued: mint a new one")
	case errors.Is(err, ErrMalformedNodeToken):
		writeError(c, http.StatusBadRequest, openai.TypeInvalidRequest, codeInvalidValue, "token", "the node token has not the shape of a generated one")
	case errors.Is(err, ledger.ErrBalanceOutOfRange):
		writeError(c, http.StatusConflict, openai.TypeInvalidRequest, codeBalanceRange, "amount_microcredits",
			fmt.Sprintf("the credit would take the team's balance past ±%d micro-credits", int64(ledger.MaxBalance)))
	case errors.Is(err, ledger.ErrInvalidInput):
		writeError(c, http.StatusBadRequest, openai.TypeInvalidRequest, codeInvalidValue, "", "the ledger refused the values")
	case errors.Is(err, ErrTeamNotFound), errors.Is(err, ledger.ErrUnknownTeam):
		writeError(c, http.StatusNotFound, openai.TypeNotFound, codeNotFound, param, "team not found")
	case errors.Is(err, ErrNotFound):
		writeError(c, http.StatusNotFound, openai.TypeNotFound, codeNotFound, param, what+" not found")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), store.IsUnavailable(err):
		a.cfg.Logger.Warn("admin request failed: database unavailable", "request_id", c.GetString(ctxRequestID),
			"route", c.FullPath(), "err", err)
		c.Header("Retry-After", retryAfterUnavailable)
		writeError(c, http.StatusServiceUnavailable, openai.TypeUnavailable, codeUnavailable, "",
			"the database is unavailable or did not answer in time; retry")
	default:
		a.cfg.Logger.Error("admin request failed", "request_id", c.GetString(ctxRequestID), "route", c.FullPath(), "err", err)
		writeError(c, http.StatusInternalServerError, openai.TypeServer, codeInternal, "", "internal error")
	}
}
