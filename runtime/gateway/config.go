package gateway

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"
	"k8s.io/utils/clock"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/httpserve"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

// Defaults of a gateway's limits, each with its reason.
const (
	// DefaultQueueLimit is the required 30 s: longer than that a user is
	// better served by a 503 and a retry than by a silent wait.
	DefaultQueueLimit = 30 * time.Second
	// DefaultFirstTokenTimeout ends a request whose engine accepted it but
	// sends nothing: an unresponsive node must not hang the client (a
	// failure docs/requirements.md lists).
	DefaultFirstTokenTimeout = 60 * time.Second
	// DefaultStreamIdleTimeout ends a stream whose engine went silent
	// after its first event: an engine wedged mid-generation keeps its
	// socket and its heartbeats, so nothing else would end the stream
	// before MaxRequestDuration. Engines send a chunk per decode step, tens
	// of milliseconds apart; a minute of silence is a fault.
	DefaultStreamIdleTimeout = 60 * time.Second
	// DefaultMaxRequestDuration bounds one request end to end; it stays
	// below the stream slots' deadline and the ledger sweeper's window so
	// that neither touches a live request.
	DefaultMaxRequestDuration = 9 * time.Minute
	// DefaultRedisTimeout bounds each Redis call on a request's path: a
	// round trip takes under a millisecond on loopback or within a zone,
	// so half a second of silence means Redis is down or frozen, and the
	// request fails fast (503) instead of waiting out the client's retries.
	// The client must honour context deadlines (go-redis's
	// ContextTimeoutEnabled), as the platform's clients do.
	DefaultRedisTimeout = 500 * time.Millisecond
	// DefaultLedgerTimeout bounds a request's ledger calls before its
	// dispatch (the quote and the reservation, together) and a usage
	// report's read: store.RequestBudget, the one budget of every database
	// wait a client makes (the console's pages have it too), past which
	// PostgreSQL is down or frozen and the client gets a 503 to retry.
	DefaultLedgerTimeout = store.RequestBudget
	// settleTimeout bounds the settle that runs after the client left; a
	// settle still not done then is kept in the settle log (keepTimeout),
	// so a settle is done or kept within 12 s of the answer's end.
	settleTimeout = 10 * time.Second
	// settleAttempts retries a settle that failed on a database blip; the
	// sweeper is the backstop after that.
	settleAttempts = 3
	// settleRetryPause spaces settle attempts: long enough for a
	// connection blip to pass, short enough to keep the handler brief.
	settleRetryPause = 100 * time.Millisecond
)

// Authenticator verifies a request's Authorization header.
type Authenticator interface {
	Authenticate(ctx context.Context, authorization string) (auth.Principal, error)
}

// Limiter is the gateway's view of the Redis limits (quota.Limiter).
type Limiter interface {
	Admit(ctx context.Context, keyID, requestID string, lim quota.KeyLimits) (quota.AdmitDecision, error)
	ReleaseStream(ctx context.Context, keyID, requestID string) error
	CountTokens(ctx context.Context, keyID, requestID string, n int64) (bool, error)
	Finish(ctx context.Context, f quota.Finish) (quota.Finished, error)
}

// RefusalCounter counts a key's 429s ((*quota.Limiter).CountRefusal).
type RefusalCounter interface {
	CountRefusal(ctx context.Context, keyID string) error
}

// RefusalRecorder counts a team's refusals by status and reason
// ((*quota.Limiter).RecordRefusal).
type RefusalRecorder interface {
	RecordRefusal(ctx context.Context, r quota.Refusal) error
}

// TimedSettler is a Ledger that records with a settle how the answer came
// (ledger.Ledger.SettleTimed). The gateway settles through it when its
// Ledger is one; a Ledger that is not (a test's wrapper) settles untimed.
type TimedSettler interface {
	SettleTimed(ctx context.Context, requestID string, u ledger.Usage, src ledger.Source, t ledger.Timing) (ledger.Outcome, error)
}

// Queue is the shared per-model queue (quota.Queue).
type Queue interface {
	Wait(ctx context.Context, model, requestID string, limit time.Duration, try quota.TryFunc) error
	Notify(ctx context.Context, model string) error
}

// Ledger is the two-phase credit ledger (ledger.Ledger).
type Ledger interface {
	Reserve(ctx context.Context, r ledger.Reservation) (ledger.Reserved, error)
	Settle(ctx context.Context, requestID string, u ledger.Usage, src ledger.Source) (ledger.Outcome, error)
	Cancel(ctx context.Context, requestID string) (ledger.Outcome, error)
	Usage(ctx context.Context, teamID int64, from, to time.Time) ([]ledger.ModelUsage, error)
}

// Quoter prices a reservation without holding it (ledger.Ledger.Quote):
// the output cap and the estimate the ledger would reserve for a team whose
// balance covers them.
type Quoter interface {
	Quote(ctx context.Context, r ledger.Reservation) (ledger.Reserved, error)
}

// SettleKeeper keeps a settle the database could not take, for replay
// once it can (settlelog.Log).
type SettleKeeper interface {
	Keep(ctx context.Context, requestID string, u ledger.Usage, src ledger.Source) error
}

// ColdStarts tells a model at zero (coldstart.Board): AtZero asks,
// holding nothing; when model has no ready replica, Refuse holds caller's
// demand and returns the wait to advise.
type ColdStarts interface {
	AtZero(ctx context.Context, model string) (bool, error)
	Refuse(ctx context.Context, model, caller string) (retryAfter time.Duration, atZero bool, err error)
}

// Unserved says, of a model no ready node serves, why none does and what
// brings one back, for a deployment where nothing starts a replica of a
// model at zero (the local mode: no cluster, no KEDA). Its answer ends a
// sentence that begins "no node serves the model …".
type Unserved interface {
	Unserved(ctx context.Context, model string) string
}

// CreditChecker tells whether a team's balance covers a reservation,
// holding nothing (ledger.Ledger.Covers).
type CreditChecker interface {
	Covers(ctx context.Context, r ledger.Reservation) error
}

// Catalog lists the models the platform serves.
type Catalog interface {
	Models(ctx context.Context) ([]openai.Model, error)
}

// StaticCatalog is a fixed list of models.
type StaticCatalog []openai.Model

// Models implements Catalog.
func (c StaticCatalog) Models(context.Context) ([]openai.Model, error) { return c, nil }

// Config is what a gateway needs. Auth, Limits, Queue and Ledger are
// required: there is no unmetered mode.
type Config struct {
	// Addr is the listen address, "127.0.0.1:8080".
	Addr string
	// TLSCertFile and TLSKeyFile turn on TLS at the edge when both are set.
	TLSCertFile, TLSKeyFile string
	// ConnLimits bound slow and idle client connections (headers, body,
	// keep-alive idle); zero fields take httpserve's defaults.
	ConnLimits httpserve.Limits

	Dispatcher dispatch.Dispatcher
	Catalog    Catalog
	Auth       Authenticator
	Limits     Limiter
	Queue      Queue
	Ledger     Ledger
	// Refusals, optional, counts each request a key's limits refuse (a
	// 429) per key and minute (quota.Limiter), for the console's keys
	// page; admitted requests never touch it.
	Refusals RefusalCounter
	// RefusalLog, optional, counts every refusal of a known team (402,
	// 429, 503) per team and UTC day and per platform hour, by status and
	// reason (quota.Limiter.RecordRefusal), for the console's latency and
	// errors pages and the platform's SLIs.
	RefusalLog RefusalRecorder
	// Quoter, when set, lets a request whose team's balance covers it many
	// times over go to its engine while its reservation commits (see
	// admit); nil means every request reserves before its dispatch.
	Quoter Quoter
	// Settles keeps the settles the database could not take (PostgreSQL
	// down), so delivered tokens are billed once it is back; nil means
	// they are logged and left to the sweeper.
	Settles SettleKeeper
	// URLGuard refuses bodies that point at internal URLs; nil means a
	// guard with the default resolver.
	URLGuard *urlguard.Guard
	// ColdStarts, when set, answers the callers of a model at zero at once
	// (see atZero); nil means they wait in the queue like any other.
	ColdStarts ColdStarts
	// WakeHold is how long a caller of a model at zero is held for the
	// model's first ready replica before its 503 (DefaultWakeHold;
	// negative: answered at once). WakeHoldBudget bounds the memory the
	// held callers keep (DefaultWakeHoldBudget).
	WakeHold       time.Duration
	WakeHoldBudget int64
	// Unserved, when set with ColdStarts, means nothing here wakes a model
	// at zero: its caller is answered at once 503 no_healthy_node with
	// Unserved's account and no Retry-After, neither held nor recorded as
	// demand, since no wake is coming (WakeHold does not apply).
	Unserved Unserved
	// Credit, when set, tells whether a caller of a model at zero has the
	// credit admission would ask of it: only such a caller is held as the
	// model's demand. nil means every caller that passed its key's limits
	// is.
	Credit CreditChecker
	// BodyBudget bounds the memory of the request bodies being read and
	// decoded at once (DefaultBodyBudget); BodyWait is how long a body
	// waits for room in it before a 503 (DefaultBodyWait).
	BodyBudget int64
	BodyWait   time.Duration
	// Metrics records the gateway's metrics; nil means a private registry.
	Metrics *Metrics
	// Admin, when set, mounts the admin API under /admin.
	Admin interface{ Register(r gin.IRouter) }
	// Console, when set, mounts the web console under /console.
	Console interface{ Register(r gin.IRouter) }

	QueueLimit        time.Duration
	FirstTokenTimeout time.Duration
	// StreamIdleTimeout is the longest silence between two engine events
	// once the first came (DefaultStreamIdleTimeout).
	StreamIdleTimeout  time.Duration
	MaxRequestDuration time.Duration
	// RedisTimeout bounds each Redis call of a request (DefaultRedisTimeout).
	RedisTimeout time.Duration
	// LedgerTimeout bounds a request's quote and reservation together,
	// and a usage report's read (DefaultLedgerTimeout).
	LedgerTimeout time.Duration
	// ShutdownGrace is how long open streams get to finish when Serve
	// shuts down (zero: ShutdownGrace).
	ShutdownGrace time.Duration
	// DrainDelay is how long Serve goes on serving every connection, old
	// and new, with /healthz answering 503, once its context ends and
	// before its shutdown begins: the time a load balancer takes to stop
	// opening connections to it (package drain). Zero starts the shutdown
	// at once (the local mode, tests).
	DrainDelay time.Duration
	// Clock is the gateway's one clock: the request's timers and deadline,
	// the timing the ledger records, the queue's and the wake hold's
	// waits, the retries, the drain and the shutdown. Nil means the real
	// clock. Only the deadlines something else keeps are in real time: a
	// context's, a socket's.
	Clock clock.WithTickerAndDelayedExecution

	// Logger receives one line per request, never its prompt or answer.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Dispatcher == nil:
		return c, errors.New("gateway: a dispatcher is required")
	case c.Auth == nil || c.Limits == nil || c.Queue == nil || c.Ledger == nil:
		return c, errors.New("gateway: auth, limits, queue and ledger are required")
	case c.Catalog == nil:
		return c, errors.New("gateway: a model catalog is required")
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return c, errors.New("gateway: TLS needs both a certificate and a key file")
	case c.LedgerTimeout < 0 || c.ShutdownGrace < 0 || c.DrainDelay < 0:
		return c, errors.New("gateway: negative ledger timeout, shutdown grace or drain delay")
	case c.BodyBudget < 0 || c.BodyWait < 0:
		return c, errors.New("gateway: negative body budget or wait")
	}
	if c.URLGuard == nil {
		c.URLGuard = &urlguard.Guard{}
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.QueueLimit == 0 {
		c.QueueLimit = DefaultQueueLimit
	}
	if c.FirstTokenTimeout == 0 {
		c.FirstTokenTimeout = DefaultFirstTokenTimeout
	}
	if c.StreamIdleTimeout == 0 {
		c.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if c.MaxRequestDuration == 0 {
		c.MaxRequestDuration = DefaultMaxRequestDuration
	}
	if c.RedisTimeout == 0 {
		c.RedisTimeout = DefaultRedisTimeout
	}
	if c.LedgerTimeout == 0 {
		c.LedgerTimeout = DefaultLedgerTimeout
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = ShutdownGrace
	}
	if c.BodyBudget == 0 {
		c.BodyBudget = DefaultBodyBudget
	}
	if c.WakeHold == 0 {
		c.WakeHold = DefaultWakeHold
	}
	if c.WakeHoldBudget <= 0 {
		c.WakeHoldBudget = DefaultWakeHoldBudget
	}
	if c.BodyWait == 0 {
		c.BodyWait = DefaultBodyWait
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c, nil
}
