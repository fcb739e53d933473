package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/llmplat/llmplat/runtime/store"
)

const (
	// DefaultSweepAfter is the age after which a row still reserved is an
	// orphan: longer than the longest allowed request (the gateway's 10 min
	// stream deadline), so the sweeper never touches a live request.
	DefaultSweepAfter = 15 * time.Minute
	// DefaultSweepInterval keeps an orphaned reservation from holding a
	// team's balance much past SweepAfter, for one indexed query a minute.
	DefaultSweepInterval = time.Minute
	// sweepBatch bounds the rows one sweep query reads, so a crash that left
	// thousands of rows is worked through in short queries.
	sweepBatch = 100
)

// Statuses of a usage_ledger row.
const (
	StatusReserved  = "reserved"
	StatusSettled   = "settled"
	StatusCancelled = "cancelled"
)

var (
	// ErrInsufficientBalance means the team's available balance cannot cover
	// the reservation (402).
	ErrInsufficientBalance = errors.New("insufficient balance")
	// ErrUnknownModel means no model of that name is declared.
	ErrUnknownModel = errors.New("unknown model")
	// ErrUnknownTeam means no team has that id.
	ErrUnknownTeam = errors.New("unknown team")
	// ErrNotFound means no ledger row has that request id.
	ErrNotFound = errors.New("ledger row not found")
	// ErrContextTooLong means the prompt leaves no room for a single output
	// token in the model's context (the gateway's 400).
	ErrContextTooLong = errors.New("prompt leaves no room for output in the model's context")
	// ErrIdempotencyConflict means a credit's idempotency key was reused
	// for a different team or amount, or a request id for another team.
	ErrIdempotencyConflict = errors.New("idempotency key reused with different values")
	// ErrInvalidInput means an argument is out of range: an empty id,
	// negative tokens, a zero amount or an unknown source.
	ErrInvalidInput = errors.New("invalid ledger input")
	// ErrOutcomeUnknown means the caller's context ended while its call
	// ran in a batch that may still commit: the reservation, settle or
	// cancel may or may not have happened. The caller must treat it as
	// possibly done (a reservation is cancelled; Settle and Cancel are
	// idempotent, so either is simply tried again later).
	ErrOutcomeUnknown = errors.New("outcome unknown: the database may yet commit")
	// ErrBalanceOutOfRange means a credit would take a team's balance past
	// ±MaxBalance; nothing was recorded.
	ErrBalanceOutOfRange = errors.New("balance would leave its range")
)

// Config tunes a Ledger. The zero value is valid.
type Config struct {
	// Clock stamps rows, ages them for the sweeper, times the quote's
	// terms and paces Run; nil means the real clock.
	Clock clock.WithTicker
	// SweepAfter is the age after which a row still reserved is swept;
	// zero means DefaultSweepAfter.
	SweepAfter time.Duration
	// SweepInterval is how often Run sweeps; zero means
	// DefaultSweepInterval.
	SweepInterval time.Duration
	// Completions is the nodes' completion log the sweeper settles from;
	// nil means the sweeper cancels every orphan.
	Completions CompletionLog
	// Logger receives sweep results and overdrafts; nil discards them.
	Logger *slog.Logger
	// NoBatching turns group commit off (PostgreSQL): every reservation and
	// every settle is then a transaction of its own. For measurements.
	NoBatching bool
	// SweptSettle, when set, is told of each row the sweeper settled, after
	// its commit: the gateway counts the request's tokens on its key's day
	// from it, as it does for the rows it settles itself.
	SweptSettle func(ctx context.Context, o Outcome)
}

// withDefaults validates c and fills its zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.SweepAfter < 0 || c.SweepInterval < 0 {
		return c, fmt.Errorf("ledger config: negative sweep duration: %w", ErrInvalidInput)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.SweepAfter == 0 {
		c.SweepAfter = DefaultSweepAfter
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Ledger reserves, settles, cancels and sweeps usage, and keeps the teams'
// balances. It is safe for concurrent use, also by several processes on one
// database.
type Ledger struct {
	db  *store.DB
	cfg Config
	// reserves and finishes combine concurrent calls into one statement
	// each (PostgreSQL; nil otherwise): batch.go.
	reserves *batcher[Reservation, Reserved]
	finishes *batcher[finishReq, Outcome]
	// batchMu runs one batch at a time, of either kind (batch.go).
	batchMu sync.Mutex
	// quotes caches the models' terms for Quote (quote.go).
	quotes termsCache
}

// New returns a Ledger on db, which must be migrated.
func New(db *store.DB, cfg Config) (*Ledger, error) {
	if db == nil {
		return nil, fmt.Errorf("ledger: nil database: %w", ErrInvalidInput)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Ledger{db: db, cfg: cfg}
	if db.Dialect() == store.Postgres && !cfg.NoBatching {
		l.reserves = &batcher[Reservation, Reserved]{run: l.reserveBatch, serial: &l.batchMu}
		l.finishes = &batcher[finishReq, Outcome]{run: l.finishBatch, serial: &l.batchMu}
	}
	return l, nil
}

// now returns the clock's time in UTC, the form both dialects compare in,
// at PostgreSQL's microsecond precision, so a time reads back as written.
func (l *Ledger) now() time.Time { return l.cfg.Clock.Now().UTC().Truncate(time.Microsecond) }

// errRollback makes InTx roll back without reporting an error, for a
// transaction that found it must change nothing after it began writing.
var errRollback = errors.New("roll back")
