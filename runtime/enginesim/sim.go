package enginesim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmplat/llmplat/runtime/openai"
)

// Sim is one simulated vLLM engine with its HTTP API.
type Sim struct {
	cfg   Config
	clock Clock
	reg   *prometheus.Registry
	m     *metrics
	sched *scheduler
	life  *lifeline
	mux   *http.ServeMux

	started atomic.Bool
	loaded  atomic.Bool

	faultsMu sync.Mutex
	faults   Faults       // Dead is read from the scheduler
	faultRNG *rand.Rand   // draws the error-rate fault
	hung     atomic.Int64 // requests the hang fault holds now
}

// New returns a simulator for cfg; zero fields take the defaults.
func New(cfg Config) (*Sim, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("enginesim config: %w", err)
	}
	s := &Sim{
		cfg:      cfg,
		clock:    cfg.Clock,
		reg:      prometheus.NewRegistry(),
		life:     newLifeline(),
		faults:   cfg.Faults,
		faultRNG: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed)),
	}
	s.m = newMetrics(s.reg, cfg)
	s.sched = newScheduler(cfg, s.m)
	s.reg.MustRegister(newStateGauges(prometheus.Labels{"model_name": cfg.ServedModelName, "engine": engineIndex}, s.sched.snapshot))
	s.loaded.Store(cfg.LoadTime == 0)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("GET /health", s.handleHealth)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /sim/faults", s.handleGetFaults)
	s.mux.HandleFunc("POST /sim/faults", s.handleSetFaults)
	return s, nil
}

// Handler returns the simulator's HTTP API: /v1/chat/completions,
// /v1/models, /health, /metrics and /sim/faults.
func (s *Sim) Handler() http.Handler { return s.mux }

// Registry returns the registry of the simulator's metrics.
func (s *Sim) Registry() *prometheus.Registry { return s.reg }

// ServedModelName returns the model name the simulator answers to.
func (s *Sim) ServedModelName() string { return s.cfg.ServedModelName }

// MaxModelLen returns the longest context the simulator accepts.
func (s *Sim) MaxModelLen() int64 { return s.cfg.MaxModelLen }

// MaxNumSeqs is how many requests the engine runs at once (vLLM's
// --max-num-seqs).
func (s *Sim) MaxNumSeqs() int { return s.cfg.MaxNumSeqs }

// Stats returns a snapshot of the engine's state and counters.
func (s *Sim) Stats() Stats {
	st := s.sched.snapshot()
	st.Hung = int(s.hung.Load())
	return st
}

// Ready reports what /health reports: loaded and alive.
func (s *Sim) Ready() bool {
	return s.loaded.Load() && !s.sched.isDead() && !s.life.isStopped()
}

// SetFaults replaces the injected faults; Dead kills or revives the engine.
func (s *Sim) SetFaults(f Faults) {
	s.faultsMu.Lock()
	s.faults = f
	s.faultsMu.Unlock()
	s.sched.setDieAfter(f.DieAfterTokens)
	s.sched.setDead(f.Dead)
}

// Faults returns the injected faults, with Dead the engine's state now.
func (s *Sim) Faults() Faults {
	s.faultsMu.Lock()
	f := s.faults
	s.faultsMu.Unlock()
	f.Dead = s.sched.isDead()
	return f
}

// drawError reports whether the error-rate fault hits this request.
func (s *Sim) drawError() bool {
	s.faultsMu.Lock()
	defer s.faultsMu.Unlock()
	return s.faults.ErrorRate > 0 && s.faultRNG.Float64() < s.faults.ErrorRate
}

// Timeouts of the HTTP server Serve runs.
const (
	// readHeaderTimeout stops a peer that never finishes its headers from
	// holding a connection; clients send headers at once.
	readHeaderTimeout = 10 * time.Second
	// shutdownTimeout bounds the wait for handlers once the engine stopped;
	// they end right away, as the engine failed their sequences.
	shutdownTimeout = 5 * time.Second
)

// Serve runs the engine and serves its API on ln until ctx ends, then
// shuts both down: in-flight streams get an error event and [DONE].
func (s *Sim) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: readHeaderTimeout}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	serveErr := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		cancel() // a listener that fails stops the engine too
		serveErr <- err
	}()
	runErr := s.Run(runCtx)
	shutCtx, shutCancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer shutCancel()
	shutErr := srv.Shutdown(shutCtx)
	err := <-serveErr
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if shutErr != nil {
		return fmt.Errorf("shut down: %w", shutErr)
	}
	return runErr
}

func (s *Sim) handleHealth(w http.ResponseWriter, _ *http.Request) {
	if !s.Ready() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Sim) handleModels(w http.ResponseWriter, _ *http.Request) {
	created := s.cfg.WallClock().Unix()
	root := s.cfg.Deployment.Model.ServedName
	if root == "" {
		root = s.cfg.Deployment.Model.Name
	}
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelCard{{
		Model: openai.Model{ID: s.cfg.ServedModelName, Object: "model", Created: created, OwnedBy: "vllm"},
		Root:  root, Parent: nil, MaxModelLen: s.cfg.MaxModelLen,
		Permission: []modelPermission{{
			ID: "modelperm-" + strings.TrimPrefix(s.cfg.NewID(), "chatcmpl-"), Object: "model_permission", Created: created,
			AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*",
		}},
	}}})
}

// modelList and modelCard are vLLM's /v1/models body: OpenAI's model
// fields, then root, parent, max_model_len and permission, in its order.
type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	openai.Model
	Root        string            `json:"root"`
	Parent      *string           `json:"parent"`
	MaxModelLen int64             `json:"max_model_len"`
	Permission  []modelPermission `json:"permission"`
}

type modelPermission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "", "encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b) // the client is gone if this fails
}

// writeError answers with vLLM's error body: the type named after the
// status and the status as an integer code.
func writeError(w http.ResponseWriter, status int, param, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(openai.NewEngineError(status, param, msg).Marshal()) // the client is gone if this fails
}

// lifeline cancels the contexts of in-flight requests when the engine
// stops, so that no handler (a hung one, one in its slow start) outlives
// Run.
type lifeline struct {
	mu      sync.Mutex
	stopped bool
	next    uint64
	cancels map[uint64]context.CancelCauseFunc
}

func newLifeline() *lifeline { return &lifeline{cancels: map[uint64]context.CancelCauseFunc{}} }

// bind returns a context that ends with parent or when the engine stops
// (cause ErrStopped), and the function that releases it.
func (l *lifeline) bind(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		cancel(ErrStopped)
		return ctx, func() {}
	}
	id := l.next
	l.next++
	l.cancels[id] = cancel
	return ctx, func() {
		l.mu.Lock()
		delete(l.cancels, id)
		l.mu.Unlock()
		cancel(context.Canceled)
	}
}

func (l *lifeline) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	for id, cancel := range l.cancels {
		cancel(ErrStopped)
		delete(l.cancels, id)
	}
}

func (l *lifeline) isStopped() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopped
}
