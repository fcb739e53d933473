package ledger

import (
	"context"
	"fmt"
	"time"
)

// CompletionLog is the nodes' record of finished requests, which the
// sweeper settles orphaned reservations from.
type CompletionLog interface {
	// Completion returns the usage a node reported for requestID and
	// whether any node reported it. It must answer false, not an error, for
	// a request no node will ever report: an error leaves the row reserved
	// until a later sweep.
	Completion(ctx context.Context, requestID string) (Usage, bool, error)
}

// SweepResult counts the rows one sweep moved out of 'reserved'.
type SweepResult struct {
	Settled, Cancelled int
}

// staleRow names a row the sweeper visits.
type staleRow struct {
	id        int64
	requestID string
}

// Sweep finishes the rows still reserved that were created more than
// Config.SweepAfter ago: it settles each from the completion log
// (SourceNodeLog) when a node reported it, and cancels it otherwise. Each
// row goes through Settle or Cancel in its own transaction, so a sweep that
// races a late real settle, or another replica's sweep, moves a row once
// and never debits twice; the result counts only the rows this call moved.
// Rows that fail are left reserved for the next sweep and reported in the
// error after the others are done.
func (l *Ledger) Sweep(ctx context.Context) (SweepResult, error) {
	cutoff := l.now().Add(-l.cfg.SweepAfter)
	var res SweepResult
	var failed, seen int
	var firstErr error
	var after int64
	for {
		batch, err := l.staleRows(ctx, cutoff, after)
		if err != nil {
			return res, fmt.Errorf("sweep: %w", err)
		}
		for _, s := range batch {
			after = s.id
			seen++
			if err := l.sweepRow(ctx, s.requestID, &res); err != nil {
				if ctx.Err() != nil {
					return res, fmt.Errorf("sweep: %w", err)
				}
				if failed++; firstErr == nil {
					firstErr = err
				}
			}
		}
		if len(batch) < sweepBatch {
			break
		}
	}
	if firstErr != nil {
		return res, fmt.Errorf("sweep: %d of %d rows failed, first: %w", failed, seen, firstErr)
	}
	return res, nil
}

// staleRows returns up to sweepBatch rows reserved before cutoff with ids
// above after, in id order, so a row that stays reserved is not revisited.
func (l *Ledger) staleRows(ctx context.Context, cutoff time.Time, after int64) ([]staleRow, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT id, request_id FROM usage_ledger
		WHERE status = 'reserved' AND created_at < $1 AND id > $2 ORDER BY id LIMIT $3`,
		cutoff, after, sweepBatch)
	if err != nil {
		return nil, fmt.Errorf("list stale rows: %w", err)
	}
	defer rows.Close()
	var out []staleRow
	for rows.Next() {
		var s staleRow
		if err := rows.Scan(&s.id, &s.requestID); err != nil {
			return nil, fmt.Errorf("scan stale row: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list stale rows: %w", err)
	}
	return out, nil
}

// sweepRow settles or cancels one orphaned row and counts it in res when
// this call moved it.
func (l *Ledger) sweepRow(ctx context.Context, requestID string, res *SweepResult) error {
	if l.cfg.Completions != nil {
		u, ok, err := l.cfg.Completions.Completion(ctx, requestID)
		if err != nil {
			return fmt.Errorf("completion log of %q: %w", requestID, err)
		}
		if ok {
			out, err := l.Settle(ctx, requestID, u, SourceNodeLog)
			if err != nil {
				return err
			}
			if out.Applied {
				res.Settled++
				if l.cfg.SweptSettle != nil {
					l.cfg.SweptSettle(ctx, out)
				}
			}
			return nil
		}
	}
	out, err := l.Cancel(ctx, requestID)
	if err != nil {
		return err
	}
	if out.Applied {
		res.Cancelled++
	}
	return nil
}

// Run sweeps at once (rows orphaned by a crash before this start) and then
// every Config.SweepInterval, until ctx ends; it returns nil then. Failed
// sweeps are logged and retried at the next interval. Replicas may all run
// it: rows move once whoever sweeps them.
func (l *Ledger) Run(ctx context.Context) error {
	t := l.cfg.Clock.NewTicker(l.cfg.SweepInterval)
	defer t.Stop()
	for {
		res, err := l.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			l.cfg.Logger.Error("ledger sweep failed", "err", err, "settled", res.Settled, "cancelled", res.Cancelled)
		} else if res.Settled+res.Cancelled > 0 {
			l.cfg.Logger.Info("ledger sweep finished orphaned reservations", "settled", res.Settled, "cancelled", res.Cancelled)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// CompletionLogs asks each log in turn: the first that knows a request
// answers for it. An error of one log leaves the row for a later sweep.
type CompletionLogs []CompletionLog

var _ CompletionLog = CompletionLogs(nil)

// Completion implements CompletionLog.
func (c CompletionLogs) Completion(ctx context.Context, requestID string) (Usage, bool, error) {
	for _, l := range c {
		u, ok, err := l.Completion(ctx, requestID)
		if err != nil || ok {
			return u, ok, err
		}
	}
	return Usage{}, false, nil
}
