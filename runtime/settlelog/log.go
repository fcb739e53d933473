package settlelog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"

	"github.com/llmplat/llmplat/runtime/ledger"
)

// Retention is how long a kept settle waits for the database: a week of
// outage, far longer than any, and every kept settle is applied or
// found settled well before.
const Retention = 7 * 24 * time.Hour

// ReplayInterval is how often Run tries the kept settles: a database back
// from an outage is billed within 10 s.
const ReplayInterval = 10 * time.Second

// replayBatch bounds the settles one replay reads.
const replayBatch = 100

// Entry is one settle the database could not take.
type Entry struct {
	RequestID string        `json:"request_id"`
	Usage     ledger.Usage  `json:"usage"`
	Source    ledger.Source `json:"source"`
	At        time.Time     `json:"at"`
}

// Settler applies a settle; *ledger.Ledger is one.
type Settler interface {
	Settle(ctx context.Context, requestID string, u ledger.Usage, src ledger.Source) (ledger.Outcome, error)
}

// Log is the settle log on one Redis prefix.
type Log struct {
	rdb    redis.UniversalClient
	prefix string
	clock  clock.WithTicker // stamps kept settles and paces Run
	logger *slog.Logger
}

var _ ledger.CompletionLog = (*Log)(nil)

// New returns the log under prefix; logger may be nil.
func New(rdb redis.UniversalClient, prefix string, logger *slog.Logger) *Log {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Log{rdb: rdb, prefix: prefix, clock: clock.RealClock{}, logger: logger}
}

// entryKey holds one kept settle; pendingKey orders them by when they were
// kept.
func (l *Log) entryKey(requestID string) string { return l.prefix + "settle:{" + requestID + "}" }
func (l *Log) pendingKey() string               { return l.prefix + "settles:pending" }

// Keep stores a settle for replay. A second Keep of a request replaces the
// first: the gateway keeps a request's settle once, from its final counts.
func (l *Log) Keep(ctx context.Context, requestID string, u ledger.Usage, src ledger.Source) error {
	e := Entry{RequestID: requestID, Usage: u, Source: src, At: l.clock.Now().UTC()}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("keep settle of %s: %w", requestID, err)
	}
	_, err = l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, l.entryKey(requestID), b, Retention)
		p.ZAdd(ctx, l.pendingKey(), redis.Z{Score: float64(e.At.UnixMilli()), Member: requestID})
		return nil
	})
	if err != nil {
		return fmt.Errorf("keep settle of %s: %w", requestID, err)
	}
	return nil
}

// Completion implements ledger.CompletionLog: the sweeper settles a row
// from the gateway's kept counts.
func (l *Log) Completion(ctx context.Context, requestID string) (ledger.Usage, bool, error) {
	e, ok, err := l.entry(ctx, requestID)
	return e.Usage, ok, err
}

// entry reads one kept settle.
func (l *Log) entry(ctx context.Context, requestID string) (Entry, bool, error) {
	b, err := l.rdb.Get(ctx, l.entryKey(requestID)).Bytes()
	if errors.Is(err, redis.Nil) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("read kept settle of %s: %w", requestID, err)
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, false, fmt.Errorf("decode kept settle of %s: %w", requestID, err)
	}
	return e, true, nil
}

// Replay applies the kept settles, oldest first, and forgets each one the
// database took (applied now, or settled before by anyone: Settle is
// idempotent by request id). onSettled, if set, hears of each outcome that
// is settled. It stops at the first settle the database refuses, which
// means it is still down, and returns how many it forgot.
func (l *Log) Replay(ctx context.Context, s Settler, onSettled func(context.Context, ledger.Outcome)) (int, error) {
	ids, err := l.rdb.ZRange(ctx, l.pendingKey(), 0, replayBatch-1).Result()
	if err != nil {
		return 0, fmt.Errorf("list kept settles: %w", err)
	}
	done := 0
	for _, id := range ids {
		e, ok, err := l.entry(ctx, id)
		if err != nil {
			return done, err
		}
		if ok {
			out, err := s.Settle(ctx, id, e.Usage, e.Source)
			switch {
			case errors.Is(err, ledger.ErrNotFound):
				// No such row: a kept cancel of a reservation whose commit
				// never happened. There is nothing to settle.
				l.logger.Info("kept settle of a row that does not exist dropped", "request_id", id)
			case err != nil:
				return done, fmt.Errorf("replay settle of %s: %w", id, err)
			}
			if out.Status == ledger.StatusSettled && onSettled != nil {
				onSettled(ctx, out)
			}
			if out.Applied {
				l.logger.Info("kept settle applied", "request_id", id, "kept_at", e.At,
					"prompt_tokens", e.Usage.PromptTokens, "completion_tokens", e.Usage.CompletionTokens)
			}
		}
		if _, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, l.entryKey(id))
			p.ZRem(ctx, l.pendingKey(), id)
			return nil
		}); err != nil {
			return done, fmt.Errorf("forget kept settle of %s: %w", id, err)
		}
		done++
	}
	return done, nil
}

// Run replays the kept settles every ReplayInterval until ctx ends; it
// returns nil then. Failed replays are logged and tried again.
func (l *Log) Run(ctx context.Context, s Settler, onSettled func(context.Context, ledger.Outcome)) error {
	t := l.clock.NewTicker(ReplayInterval)
	defer t.Stop()
	for {
		if _, err := l.Replay(ctx, s, onSettled); err != nil && ctx.Err() == nil {
			l.logger.Warn("kept settles not replayed yet", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}
