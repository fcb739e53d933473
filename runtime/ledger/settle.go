package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Usage is the tokens a request consumed.
type Usage struct {
	PromptTokens, CompletionTokens int64
}

// Source says where a settle's counts came from (usage_ledger.settled_from).
type Source string

// The sources of a settle.
const (
	// SourceExact is the engine's final usage chunk.
	SourceExact Source = "exact"
	// SourcePartial is the tokens produced before a disconnect or failure.
	SourcePartial Source = "partial"
	// SourceNodeLog is the node's completion log, replayed or swept.
	SourceNodeLog Source = "node_log"
)

// valid reports whether s is one of the sources.
func (s Source) valid() bool {
	switch s {
	case SourceExact, SourcePartial, SourceNodeLog:
		return true
	}
	return false
}

// Outcome is a ledger row after Settle or Cancel.
type Outcome struct {
	RequestID string
	TeamID    int64
	KeyID     int64 // 0 = none (JWT)
	Model     string
	Status    string // StatusSettled or StatusCancelled (StatusReserved only if never finished)
	Source    Source // set when settled
	Usage     Usage
	// CostMicrocredits is what the team was debited: 0 when cancelled.
	CostMicrocredits int64
	// Applied is true only for the call that moved the row out of
	// 'reserved'; a retried or losing concurrent call gets false and the
	// row as the winner left it.
	Applied bool
	// Overdrawn means this settle took the team's balance below zero: its
	// balance was lowered while the request ran. The debt is carried.
	Overdrawn bool
	// Capped means the usage reported went past the reservation (its
	// tokens, or its cost) and the team was debited at most the
	// reservation: the difference went unbilled. It is logged; the gateway
	// counts it.
	Capped bool
	// Corrected is what BoundUsage changed in the usage this settle was
	// given (Usage is what was billed). A caller that bounds the usage
	// itself first, as the gateway does, leaves nothing to correct here.
	Corrected Correction
}

// Settle moves the reserved row of requestID to settled with usage u from
// src, and in the same transaction debits the team by the cost and releases
// the reservation. u is first bounded by the row's reservation (BoundUsage:
// a negative count is zero, a count beyond the reservation is the bound;
// logged as an error, reported in Outcome.Corrected), so whatever a node
// or engine reported, a settle always closes the row. The cost is Cost(u)
// at the prices reserved with the row, capped at the reservation: the
// client was promised at most that. A row already settled or cancelled is
// returned unchanged with Applied false; an unknown request id is
// ErrNotFound.
func (l *Ledger) Settle(ctx context.Context, requestID string, u Usage, src Source) (Outcome, error) {
	return l.settle(ctx, requestID, u, src, nil)
}

// settle is Settle, recording t with the row when it is not nil.
func (l *Ledger) settle(ctx context.Context, requestID string, u Usage, src Source, t *Timing) (Outcome, error) {
	if requestID == "" || !src.valid() || (t != nil && !t.valid()) {
		return Outcome{}, fmt.Errorf("settle %q: source %q, usage %+v, timing %+v: %w", requestID, src, u, t, ErrInvalidInput)
	}
	out, err := l.finish(ctx, requestID, StatusSettled, src, u, t)
	if err != nil {
		return out, fmt.Errorf("settle %q: %w", requestID, err)
	}
	return out, nil
}

// Cancel moves the reserved row of requestID to cancelled and releases the
// reservation at no cost. A row already settled or cancelled is returned
// unchanged with Applied false; an unknown request id is ErrNotFound.
func (l *Ledger) Cancel(ctx context.Context, requestID string) (Outcome, error) {
	if requestID == "" {
		return Outcome{}, fmt.Errorf("cancel: empty request id: %w", ErrInvalidInput)
	}
	out, err := l.finish(ctx, requestID, StatusCancelled, "", Usage{}, nil)
	if err != nil {
		return out, fmt.Errorf("cancel %q: %w", requestID, err)
	}
	return out, nil
}

// finish moves a reserved row to status (settled or cancelled) in one
// transaction. The row is read under a lock (the IMMEDIATE transaction on
// SQLite) and updated only from 'reserved', so of any number of concurrent
// calls exactly one applies.
func (l *Ledger) finish(ctx context.Context, requestID, status string, src Source, u Usage, t *Timing) (Outcome, error) {
	if l.finishes != nil {
		out, ok, err := l.finishes.do(ctx, finishReq{requestID: requestID, status: status, src: src, usage: u, timing: t})
		if ok || err != nil {
			return out, err
		}
	}
	var out Outcome
	reported := u
	err := l.db.InTx(ctx, func(tx *sql.Tx) error {
		row, err := l.lockRow(ctx, tx, requestID)
		if err != nil {
			return err
		}
		out = row.outcome()
		if row.status != StatusReserved {
			return nil
		}
		var corrected Correction
		if status == StatusSettled {
			u, corrected = BoundUsage(u, Relayed{}, row.bounds())
		}
		if status == StatusSettled && src.partial() {
			var produced bool
			u, produced = partialUsage(u, row.usage.PromptTokens)
			if !produced {
				status = StatusCancelled
			}
		}
		var cost int64
		var from any             // settled_from is NULL unless settled
		var ttft, gen, queue any // the timing is NULL unless settled with one
		capped := false
		if status == StatusSettled {
			full := Cost(u.PromptTokens, u.CompletionTokens, row.promptPrice, row.completionPrice)
			var over bool
			cost, over = charge(full, row.reserved)
			capped = over || corrected&OverReserved != 0
			if over {
				l.cfg.Logger.Warn("settle capped at the reservation: the usage cost more than was reserved",
					"request_id", requestID, "team_id", row.teamID, "source", string(src),
					"prompt_tokens", u.PromptTokens, "completion_tokens", u.CompletionTokens,
					"cost_microcredits", full, "reserved_microcredits", row.reserved)
			}
			from = string(src)
			if t != nil {
				ttft, gen, queue = t.millis()
			}
		} else {
			u = Usage{}
		}
		res, err := tx.ExecContext(ctx, `UPDATE usage_ledger SET status = $2, settled_from = $3,
			prompt_tokens = $4, completion_tokens = $5, cost_microcredits = $6, settled_at = $7,
			ttft_ms = $8, generation_ms = $9, queue_ms = $10
			WHERE id = $1 AND status = 'reserved'`,
			row.id, status, from, u.PromptTokens, u.CompletionTokens, cost, l.now(), ttft, gen, queue)
		if err != nil {
			return fmt.Errorf("update row: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			// The row lock makes this impossible; refuse to debit if it happens.
			return fmt.Errorf("update row: %d rows moved (%v), want 1", n, err)
		}
		var balance int64
		err = tx.QueryRowContext(ctx, `UPDATE teams SET balance_microcredits = balance_microcredits - $2,
			reserved_microcredits = reserved_microcredits - $3 WHERE id = $1 RETURNING balance_microcredits`,
			row.teamID, cost, row.reserved).Scan(&balance)
		if err != nil {
			return fmt.Errorf("debit team %d: %w", row.teamID, err)
		}
		out.Status, out.Usage, out.CostMicrocredits, out.Applied, out.Capped = status, u, cost, true, capped
		out.Source, out.Corrected = src, corrected
		if cost > 0 && balance < 0 {
			out.Overdrawn = true
			l.cfg.Logger.Warn("settle overdrew a team: its balance was lowered while the request ran",
				"request_id", requestID, "team_id", row.teamID, "cost_microcredits", cost, "balance_microcredits", balance)
		}
		return nil
	})
	if err == nil && out.Applied && out.Corrected != 0 {
		l.logCorrected(out, reported)
	}
	return out, err
}

// ledgerRow is a usage_ledger row as finish needs it.
type ledgerRow struct {
	id, teamID, keyID int64
	requestID         string
	model, status     string
	source            Source
	usage             Usage
	reserved, cost    int64
	promptPrice       int64
	completionPrice   int64
	maxOutput         int64
}

// bounds returns what the row's reservation allows a settle to bill: its
// prompt_tokens hold the prompt estimate while it is reserved.
func (r ledgerRow) bounds() Bounds {
	return Bounds{PromptEstimate: r.usage.PromptTokens, MaxOutput: r.maxOutput}
}

// lockRow reads the row of requestID and locks it until the transaction
// ends.
func (l *Ledger) lockRow(ctx context.Context, tx *sql.Tx, requestID string) (ledgerRow, error) {
	r := ledgerRow{requestID: requestID}
	var keyID sql.NullInt64
	var source sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT id, team_id, key_id, model, status, settled_from,
		prompt_tokens, completion_tokens, reserved_microcredits, cost_microcredits,
		prompt_price_micro_per_mtok, completion_price_micro_per_mtok, max_output_tokens
		FROM usage_ledger WHERE request_id = $1`+l.db.Dialect().ForUpdate(), requestID).
		Scan(&r.id, &r.teamID, &keyID, &r.model, &r.status, &source,
			&r.usage.PromptTokens, &r.usage.CompletionTokens, &r.reserved, &r.cost,
			&r.promptPrice, &r.completionPrice, &r.maxOutput)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("lock row: %w", err)
	}
	r.keyID, r.source = keyID.Int64, Source(source.String)
	return r, nil
}

// outcome returns the row as an Outcome of a call that changed nothing.
func (r ledgerRow) outcome() Outcome {
	return Outcome{
		RequestID: r.requestID, TeamID: r.teamID, KeyID: r.keyID, Model: r.model, Status: r.status, Source: r.source,
		Usage: r.usage, CostMicrocredits: r.cost,
	}
}

// logCorrected reports a settle whose usage BoundUsage corrected, once: the
// settle closed the row. Callers that bound the usage themselves (the
// gateway) never get here, so this is a node's or a kept record's report
// the platform could not take as it was.
func (l *Ledger) logCorrected(out Outcome, reported Usage) {
	l.cfg.Logger.Error("settle corrected a reported usage the reservation does not allow",
		"request_id", out.RequestID, "team_id", out.TeamID, "source", string(out.Source), "corrected", out.Corrected.String(),
		"reported_prompt_tokens", reported.PromptTokens, "reported_completion_tokens", reported.CompletionTokens,
		"billed_prompt_tokens", out.Usage.PromptTokens, "billed_completion_tokens", out.Usage.CompletionTokens)
}
