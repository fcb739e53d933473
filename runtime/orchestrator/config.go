package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"

	"github.com/llmplat/llmplat/runtime/coldstart"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/routing"
)

// Defaults of Config.
const (
	// DefaultRegistrationsPerSecond is the cluster-wide registration rate:
	// 500 nodes come back from a restart of every replica within 20 s, and
	// each registration costs one token check and one transaction.
	DefaultRegistrationsPerSecond = 25
	// RefreshInterval is how often the routing snapshot is read from
	// Redis: a second of staleness against 5 s heartbeats, and one List
	// per replica per second whatever the request rate.
	RefreshInterval = time.Second
	// ShutdownGrace is how long a replica that is going away lets its
	// sockets finish their in-flight requests before closing them.
	ShutdownGrace = 30 * time.Second
	// TokenRecheckInterval is how often a live socket's token is checked
	// again: the backstop for a revocation whose message was lost.
	TokenRecheckInterval = 30 * time.Second
	// writeQueue is a socket's queue of outgoing frames (assign, cancel,
	// window, ack): server frames are few, so a full queue means a stuck
	// socket, and the link is dropped.
	writeQueue = 256
	// publishTimeout bounds one pub/sub publish: Redis answers in
	// milliseconds, and a stuck publish must not hold a stream forever.
	publishTimeout = 5 * time.Second
	// storeTimeout bounds one registration or event write to PostgreSQL.
	storeTimeout = 5 * time.Second
	// tokenRecheckTimeout bounds one recheck of a live socket's token in
	// PostgreSQL: a database that has not answered in 5 s leaves the socket
	// as it is until the next recheck (the database, not the node, failed).
	tokenRecheckTimeout = storeTimeout
	// redisTimeout bounds a record write (heartbeat, state, completion) made
	// from a socket's read loop: a stuck Redis must not stop the socket
	// being read, and a beat 2 s late is worth less than the next one.
	redisTimeout = 2 * time.Second
)

// TokenVerifier checks a node's token; admin.SQLNodeTokens implements it.
// The error wraps admin.ErrInvalidNodeToken for a bad or revoked token.
type TokenVerifier interface {
	Verify(ctx context.Context, nodeID, token string) error
}

// Config is what an Orchestrator needs.
type Config struct {
	// ID names this replica: the owner field of the records of the nodes
	// whose sockets it holds (the pod name in the cluster).
	ID string
	// Redis carries the registry and the pub/sub channels.
	Redis redis.UniversalClient
	// Registry is the node registry over the same Redis.
	Registry *registry.Registry
	// Tokens verifies node tokens.
	Tokens TokenVerifier
	// Events records registrations, drains and departures; nil records
	// nothing (tests of routing alone).
	Events *Events
	// Policy chooses a node; nil means routing.Default.
	Policy routing.Policy
	// RegistrationsPerSecond is the cluster-wide registration rate; zero
	// means DefaultRegistrationsPerSecond.
	RegistrationsPerSecond int
	// Window is each request's chunk credit; zero means
	// nodeproto.DefaultWindow.
	Window int
	// CloudNodes are engines in the cluster reached over HTTP, without an
	// agent, from configuration: a cluster without the Kubernetes API.
	CloudNodes []CloudNode
	// Cloud, when set, tells which cloud nodes exist as they come and go
	// (the Kubernetes controller's EndpointSlices); it replaces CloudNodes.
	Cloud CloudSource
	// CloudClient sends requests to cloud nodes' service URLs; nil means
	// engineclient.NewEngineClient(): no timeout, and an idle pool that keeps a
	// connection per concurrent stream.
	CloudClient *http.Client
	// Pending, optional, reports the requests waiting for a model outside
	// the orchestrator (the gateways' shared queue), for the pending gauge.
	Pending func(ctx context.Context, model string) (int64, error)
	// Models, optional, lists the declared models, so the pending gauge
	// exists for a model no node serves.
	Models func(ctx context.Context) ([]string, error)
	// ColdStarts, optional, is the shared wake record: every refresh
	// publishes whether each model has a healthy node, and the pending
	// gauge counts the callers refused at zero until one has.
	ColdStarts *coldstart.Board
	// Metrics receives the orchestrator's metrics; nil registers nothing.
	Metrics *Metrics
	// ShutdownGrace is how long a replica that is going away lets its
	// sockets finish their requests; zero means ShutdownGrace.
	ShutdownGrace time.Duration
	// DrainDelay is how long a replica whose Run context ended goes on
	// accepting and serving node sockets, with the node socket's /healthz
	// answering 503, before it asks its nodes to reconnect elsewhere: the
	// time the load balancer in front of the node socket takes to stop
	// opening connections to it, so that the nodes reconnect to the other
	// replicas and not to this one (package drain). Zero starts the
	// shutdown at once (the local mode, tests).
	DrainDelay time.Duration
	// Version is the software version sent in welcome.
	Version string
	// Clock tells the time and runs every timer of the replica's own
	// logic (routing, refresh, silence, pings, token rechecks, shutdown
	// grace); nil means the real clock. Tests drive it with a fake.
	Clock clock.WithTickerAndDelayedExecution
	// Logger receives the orchestrator's logs; nil discards them.
	Logger *slog.Logger
}

// ErrConfig means a Config is unusable.
var ErrConfig = errors.New("orchestrator: invalid config")

// withDefaults validates c and fills its defaults.
func (c Config) withDefaults() (Config, error) {
	switch {
	case !nodeproto.ValidID(c.ID):
		return c, fmt.Errorf("%w: replica id %q", ErrConfig, c.ID)
	case c.Redis == nil || c.Registry == nil:
		return c, fmt.Errorf("%w: redis and registry are required", ErrConfig)
	case c.Tokens == nil:
		return c, fmt.Errorf("%w: a token verifier is required", ErrConfig)
	case c.RegistrationsPerSecond < 0 || c.Window < 0:
		return c, fmt.Errorf("%w: negative rate or window", ErrConfig)
	}
	for _, n := range c.CloudNodes {
		if err := n.validate(); err != nil {
			return c, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if c.Cloud != nil && len(c.CloudNodes) > 0 {
		return c, fmt.Errorf("%w: give cloud nodes as a list or as a source, not both", ErrConfig)
	}
	if c.Cloud == nil && len(c.CloudNodes) > 0 {
		c.Cloud = StaticCloud(c.CloudNodes)
	}
	if c.Policy == nil {
		p, err := routing.New(routing.Default)
		if err != nil {
			return c, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		c.Policy = p
	}
	if c.RegistrationsPerSecond == 0 {
		c.RegistrationsPerSecond = DefaultRegistrationsPerSecond
	}
	if c.Window == 0 {
		c.Window = nodeproto.DefaultWindow
	}
	if c.CloudClient == nil {
		c.CloudClient = engineclient.NewEngineClient()
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = ShutdownGrace
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	return c, nil
}
