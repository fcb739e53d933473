package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/openai"
)

// Limits of the front door, each with its reason.
const (
	// MaxBodyBytes bounds a request body: 8 MiB holds a 128k-token prompt
	// with room to spare; anything larger is an abuse, answered 413.
	MaxBodyBytes = 8 << 20
	// ShutdownGrace is how long open streams get to finish at shutdown.
	ShutdownGrace = 30 * time.Second
)

// Server is a gateway.
type Server struct {
	cfg    Config
	engine *gin.Engine
	// bg counts the work that runs after a response is complete: settles
	// and queue wake-ups (afterRelay).
	bg sync.WaitGroup
	// stopping closes when Serve begins to shut down: background retries
	// give up then rather than hold the shutdown.
	stopping     chan struct{}
	stoppingOnce sync.Once
	// balances is what this replica saw of teams' available balances: it
	// decides which requests reserve while their engine prefills.
	balances *balanceView
}

// Wait returns once the work started after every finished response (the
// settles, bounded by their own timeouts) is done. Serve calls it after
// shutdown; a caller of Handler calls it before closing the ledger.
func (s *Server) Wait() { s.bg.Wait() }

// New returns a gateway for cfg.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	gin.SetMode(gin.ReleaseMode)
	s := &Server{cfg: cfg, engine: gin.New(), stopping: make(chan struct{}), balances: newBalanceView(time.Now)}
	// The recovery logs through the gateway's logger only: gin's own
	// writer would dump the request's headers to stderr.
	s.engine.Use(gin.CustomRecoveryWithWriter(io.Discard, s.recovered), requestID)
	s.engine.NoRoute(func(c *gin.Context) {
		writeError(c, http.StatusNotFound, openai.NewError(openai.TypeNotFound, "unknown_url", "", "no route for "+c.Request.Method+" "+c.Request.URL.Path))
	})
	s.engine.NoMethod(func(c *gin.Context) {
		writeError(c, http.StatusMethodNotAllowed, openai.NewError(openai.TypeInvalidRequest, "method_not_allowed", "", c.Request.Method+" is not allowed on "+c.Request.URL.Path))
	})
	s.engine.HandleMethodNotAllowed = true
	v1 := s.engine.Group("/v1")
	v1.POST("/chat/completions", s.chatCompletions)
	v1.GET("/models", s.listModels)
	v1.GET("/usage", s.usage)
	s.engine.GET("/healthz", func(c *gin.Context) { c.Status(http.StatusOK) })
	if cfg.Admin != nil {
		cfg.Admin.Register(s.engine.Group(""))
	}
	return s, nil
}

// Handler returns the gateway's HTTP handler.
func (s *Server) Handler() http.Handler { return s.engine }

// Run listens on the configured address and serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("gateway listen: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then lets open streams finish for up
// to ShutdownGrace. With a certificate configured it serves TLS.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := s.cfg.ConnLimits.New(s.engine)
	errc := make(chan error, 1)
	go func() {
		if s.cfg.TLSCertFile != "" {
			errc <- srv.ServeTLS(ln, s.cfg.TLSCertFile, s.cfg.TLSKeyFile)
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	s.stoppingOnce.Do(func() { close(s.stopping) })
	s.Wait() // the last responses' settles
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

func (s *Server) recovered(c *gin.Context, err any) {
	s.cfg.Logger.Error("handler panic", "request_id", requestIDOf(c), "panic", err, "stack", string(debug.Stack()))
	writeError(c, http.StatusInternalServerError, openai.NewError(openai.TypeServer, "internal_error", "", "internal error"))
}

// requestIDHeader carries a request's id back to its client.
const requestIDHeader = "X-Request-Id"

// requestID gives every request an id, returned in x-request-id.
func requestID(c *gin.Context) {
	c.Header(requestIDHeader, newRequestID())
	c.Next()
}

// requestIDOf is the id requestID gave c. It is kept only in the response's
// header: a value in gin's map would cost every open stream that map.
func requestIDOf(c *gin.Context) string { return c.Writer.Header().Get(requestIDHeader) }

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return "req_" + hex.EncodeToString(b[:])
}

// writeError answers with an OpenAI error body.
func writeError(c *gin.Context, status int, body *openai.ErrorBody) {
	c.Header("Content-Type", "application/json")
	c.AbortWithStatus(status)
	_, _ = c.Writer.Write(body.Marshal())
}
