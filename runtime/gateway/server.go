package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"k8s.io/utils/clock"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/drain"
	"github.com/llmplat/llmplat/runtime/openai"
)

// Limits of the front door, each with its reason.
const (
	// MaxBodyBytes bounds a request body: 8 MiB holds a 128k-token prompt
	// with room to spare; anything larger is an abuse, answered 413.
	MaxBodyBytes = 8 << 20
	// ShutdownGrace is how long open streams get to finish at shutdown
	// (Config.ShutdownGrace); Serve's whole shutdown is ShutdownBudget.
	ShutdownGrace = 30 * time.Second
	// ShutdownBudget is the longest Serve takes from the end of its drain
	// to its return with the default grace: the streams' grace, then the
	// requests' end, the settles' budget and their keep (see Serve). The
	// pod's terminationGracePeriodSeconds covers the drain delay plus
	// this, and the load balancer's deregistration delay outlasts both
	// (templates/platform.yaml.tmpl, modules/eks-llm/edge.tf; a test
	// checks the three).
	ShutdownBudget = ShutdownGrace + requestsEndTimeout + shutdownSettleBudget + keepTimeout
	// requestsEndTimeout bounds the wait, at shutdown, for the handlers of
	// the requests ended after the grace: cancelled, and their
	// connections closed, they return at once.
	requestsEndTimeout = 2 * time.Second
	// shutdownSettleBudget is what the settles still running once every
	// request ended get to reach the database before they are kept in the
	// settle log instead: with keepTimeout after it, the shutdown ends
	// within ShutdownBudget.
	shutdownSettleBudget = 4 * time.Second
)

// Server is a gateway.
type Server struct {
	cfg    Config
	engine *gin.Engine
	// bg counts the work that runs after a response is complete: settles
	// and queue wake-ups (admission.Close).
	bg sync.WaitGroup
	// stopping closes when Serve begins to shut down: background retries
	// give up then rather than hold the shutdown.
	stopping     chan struct{}
	stoppingOnce sync.Once
	// draining closes as soon as Serve's context ends: the callers held
	// for a model at zero are answered then, to retry elsewhere, rather
	// than hold the shutdown.
	draining     chan struct{}
	drainingOnce sync.Once
	// holds holds the callers of models at zero (atZero).
	holds *wakeHolds
	// settling is the settles' context (finish): Serve ends it
	// shutdownSettleBudget after the last request ended, so that every
	// settle still running is kept in the settle log before Serve returns.
	settling     context.Context
	stopSettling context.CancelFunc
	// requests counts the handlers running, for Serve to wait for.
	requests requestGate
	// balances is what this replica saw of teams' available balances: it
	// decides which requests reserve while their engine prefills.
	balances *balanceView
	// serving remembers, per model, when the cold-start record last said
	// the model was not at zero (atZero).
	serving sync.Map // model → *atomic.Int64 (UnixNano)
	// bodies bounds the memory of the request bodies being read and
	// decoded at once (readRequest).
	bodies *bodyBudget
	// health is /healthz, the load balancer's health check: it fails from
	// the start of Serve's drain on.
	health *drain.Gate
	// pause spaces a failed settle's attempts (finish): pauseFor, which a
	// test replaces to count the pauses and end them.
	pause func(ctx context.Context, d time.Duration) bool
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
	s := &Server{cfg: cfg, engine: gin.New(), stopping: make(chan struct{}), draining: make(chan struct{}), balances: newBalanceView(cfg.Clock),
		bodies: newBodyBudget(cfg.BodyBudget, cfg.BodyWait, cfg.Metrics), health: drain.NewGate(cfg.Clock)}
	s.settling, s.stopSettling = context.WithCancel(context.Background())
	s.pause = func(ctx context.Context, d time.Duration) bool { return pauseFor(ctx, cfg.Clock, d) }
	s.holds = newWakeHolds(cfg.ColdStarts, cfg.WakeHoldBudget, cfg.RedisTimeout, cfg.Clock)
	// The recovery logs through the gateway's logger only: gin's own
	// writer would dump the request's headers to stderr.
	s.engine.Use(s.track, gin.CustomRecoveryWithWriter(io.Discard, s.recovered), requestID)
	s.engine.NoRoute(func(c *gin.Context) {
		writeError(c, http.StatusNotFound, openai.NewError(openai.TypeNotFound, "unknown_url", "", "no route for "+c.Request.Method+" "+c.Request.URL.Path))
	})
	s.engine.NoMethod(func(c *gin.Context) {
		writeError(c, http.StatusMethodNotAllowed, openai.NewError(openai.TypeInvalidRequest, "method_not_allowed", "", c.Request.Method+" is not allowed on "+c.Request.URL.Path))
	})
	s.engine.HandleMethodNotAllowed = true
	v1 := s.engine.Group("/v1")
	v1.POST("/chat/completions", s.chatCompletions)
	v1.POST("/responses", s.responses)
	v1.GET("/models", s.listModels)
	v1.GET("/usage", s.usage)
	// /healthz is readiness, the load balancer's and the kubelet's: it
	// fails while Serve drains. /livez is liveness: a draining gateway is
	// alive, and restarting it would cut the streams it drains.
	s.engine.GET("/healthz", gin.WrapH(s.health))
	s.engine.GET("/livez", func(c *gin.Context) { c.Status(http.StatusOK) })
	if cfg.Admin != nil {
		cfg.Admin.Register(s.engine.Group(""))
	}
	if cfg.Console != nil {
		cfg.Console.Register(s.engine.Group(""))
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

// Serve serves on ln until ctx ends, then drains and shuts down. With a
// certificate configured it serves TLS.
//
// The drain comes first: for Config.DrainDelay, /healthz answers 503 while
// every connection, old and new, is served as before, so that the load
// balancer stops opening connections here before the listener closes
// (package drain). The shutdown then runs in this order, so that every delivered token is settled
// or kept before the process exits, within ShutdownBudget (inside the
// pod's grace), whatever the database does (down, or frozen):
//
//  1. no new connections; open streams finish, for up to ShutdownGrace;
//  2. the requests still running are ended (their contexts cancelled,
//     their connections closed) and their handlers waited for, up to
//     requestsEndTimeout: each queues the settle of what it relayed;
//  3. the settles still running get shutdownSettleBudget more to reach the
//     database, then each not done is kept in the settle log (keepTimeout);
//  4. Serve returns once every settle is done or kept.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := s.cfg.ConnLimits.New(s.engine)
	// The requests' contexts outlive ctx, for the grace; endRequests ends
	// them after it.
	base, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	srv.BaseContext = func(net.Listener) context.Context { return base }
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
	s.health.Drain(s.cfg.DrainDelay)
	s.drainingOnce.Do(func() { close(s.draining) })
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	err := srv.Shutdown(sctx) // 1
	cancel()
	s.stoppingOnce.Do(func() { close(s.stopping) })
	endRequests() // 2
	if err != nil {
		// Streams outlived the grace: closing their connections also ends
		// a write to a client that stopped reading.
		_ = srv.Close()
	}
	if !s.requests.closeAndWait(s.cfg.Clock, requestsEndTimeout) {
		s.cfg.Logger.Error("requests still running after the shutdown ended them; their settles may be lost",
			"timeout", requestsEndTimeout.String())
	}
	stop := s.cfg.Clock.AfterFunc(shutdownSettleBudget, s.stopSettling) // 3
	s.Wait()                                                            // 4
	stop.Stop()
	s.stopSettling()
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// track counts the request for Serve's shutdown, which waits for its
// handler; once the shutdown has ended the requests, it refuses new ones.
func (s *Server) track(c *gin.Context) {
	if !s.requests.enter() {
		writeError(c, http.StatusServiceUnavailable, openai.NewError(openai.TypeUnavailable, "shutting_down", "",
			"the gateway is shutting down; retry"))
		return
	}
	defer s.requests.exit()
	c.Next()
}

// requestGate counts the requests being served; once closed it admits
// none, so that a wait for the ones it counted is a wait for all.
type requestGate struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// enter counts a request, unless the gate is closed.
func (g *requestGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// exit ends a request enter counted.
func (g *requestGate) exit() { g.wg.Done() }

// closeAndWait closes the gate and waits up to within for the requests it
// counted to end; it reports whether they did.
func (g *requestGate) closeAndWait(clk clock.Clock, within time.Duration) bool {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	t := clk.NewTimer(within)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C():
		return false
	}
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
