package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"k8s.io/utils/clock"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/llmplat/llmplat/runtime/agentflags"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// DefaultEngineURL is vLLM's default address beside the agent.
const DefaultEngineURL = "http://127.0.0.1:8000"

// Config is everything an Agent needs.
type Config struct {
	// ServerURL is the orchestrator's socket, ws:// or wss://…/v1/nodes/connect.
	ServerURL string
	// NodeID names this node (1 to 128 bytes of [A-Za-z0-9._-]).
	NodeID string
	// Token is the node's own token; it is never logged.
	Token nodeproto.Secret
	// EngineURL is the engine's base URL without /v1; empty means
	// DefaultEngineURL.
	EngineURL string
	// Models are the models the engine serves.
	Models []nodeproto.Model
	// GPUs are the node's GPUs, empty when telemetry is unavailable.
	GPUs []nodeproto.GPU
	// Version is the agent's software version.
	Version string
	// HTTPClient talks to the engine; nil means engineclient.NewEngineClient():
	// no timeout, since a stream lasts as long as the answer, and an idle
	// pool that keeps a connection per concurrent stream.
	HTTPClient *http.Client
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger
	// Rand is the backoff's jitter source; nil means the runtime's.
	Rand rand.Source
	// CompletionLog, when set, is a file to which the agent appends one
	// JSON line per finished request (see Completion), so a sweeper can
	// settle from the node's own counts after a crash; empty means none.
	CompletionLog string
	// GPUQuery reads the GPUs' utilisation for a heartbeat, one percentage
	// per line as nvidia-smi prints it with
	// --query-gpu=utilization.gpu --format=csv,noheader,nounits. Nil means
	// nvidia-smi when it is on the PATH at New, and otherwise no gpu_util.
	GPUQuery func(ctx context.Context) ([]byte, error)
	// Clock is the agent's one clock: its deadlines, timers and tickers,
	// and the stamps of completion log lines. Nil means the real clock.
	Clock clock.WithTickerAndDelayedExecution

	// pingEvery and pongWithin pace the agent's pings; zero means
	// nodeproto.PingInterval and nodeproto.ReadTimeout. Tests shorten them.
	pingEvery, pongWithin time.Duration
	// creditStall is how long a request waits for a chunk grant before the
	// agent gives it up; zero means DefaultCreditStall. Tests shorten it.
	creditStall time.Duration
}

// DefaultCreditStall bounds a request's wait for chunk credit: a server
// that granted nothing for two minutes has lost the request's consumer (a
// reading client is granted within milliseconds), and the engine slot is
// worth more than the wait.
const DefaultCreditStall = 2 * time.Minute

// ErrConfig means a Config is unusable.
var ErrConfig = errors.New("nodeagent: invalid config")

// withDefaults validates c and fills its defaults.
func (c Config) withDefaults() (Config, error) {
	if err := agentflags.CheckServerURL(c.ServerURL); err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if !nodeproto.ValidID(c.NodeID) {
		return c, fmt.Errorf("%w: node id %q", ErrConfig, c.NodeID)
	}
	if c.Token == "" {
		return c, fmt.Errorf("%w: token is required", ErrConfig)
	}
	if c.EngineURL == "" {
		c.EngineURL = DefaultEngineURL
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.HTTPClient == nil {
		c.HTTPClient = engineclient.NewEngineClient()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.GPUQuery == nil {
		c.GPUQuery = nvidiaSMI()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.pingEvery <= 0 {
		c.pingEvery = nodeproto.PingInterval
	}
	if c.pongWithin <= 0 {
		c.pongWithin = nodeproto.ReadTimeout
	}
	if c.creditStall <= 0 {
		c.creditStall = DefaultCreditStall
	}
	reg := c.register()
	if err := reg.Validate(); err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c, nil
}

// register returns the node's first frame.
func (c *Config) register() *nodeproto.Register {
	return &nodeproto.Register{
		NodeID:   c.NodeID,
		Token:    c.Token,
		GPUs:     c.GPUs,
		Models:   c.Models,
		Version:  c.Version,
		Location: nodeproto.LocationOnPrem,
	}
}

// modelNames returns the platform names of the served models.
func (c *Config) modelNames() []string {
	names := make([]string, 0, len(c.Models))
	for _, m := range c.Models {
		names = append(names, m.Name)
	}
	return names
}

// serves reports whether the engine serves the platform model name.
func (c *Config) serves(name string) bool {
	for _, m := range c.Models {
		if m.Name == name {
			return true
		}
	}
	return false
}
