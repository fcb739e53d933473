// Package ledger is the platform's two-phase credit ledger: every request
// reserves its worst-case cost before the GPU works, and is then settled
// with its exact usage or cancelled, exactly once.
//
// One implementation serves PostgreSQL and the local mode's SQLite through
// store.DB. Every change of money is one transaction that touches the
// request's usage_ledger row and its team's row together, so the ledger
// keeps these invariants at every commit, whatever crashes or retries:
//
//   - teams.balance_microcredits = Σ credit_entries − Σ costs of settled rows;
//   - teams.reserved_microcredits = Σ reserved_microcredits of the team's rows
//     still in 'reserved' (migration 0002), so admission reads one locked row
//     instead of summing a ledger that grows without bound;
//   - a row leaves 'reserved' once: Settle and Cancel move it only from
//     'reserved', under a row lock, so a retried, concurrent or swept settle
//     is a no-op and a team is never debited twice.
//
// The rules the code follows, and the reasons:
//
//   - Reserve clamps the output to the model's max_output_tokens and to the
//     room the prompt leaves in its context (ErrContextTooLong when none).
//     When the client set no max_tokens, the output is also clamped to what
//     the available balance covers, so a team with little credit gets a
//     shorter answer rather than a false refusal for a length it never asked
//     for; an explicit max_tokens the balance cannot cover is refused
//     (ErrInsufficientBalance). Prices and the cap are stored on the row.
//   - Every count a settle is given is bounded first (BoundUsage, the one
//     rule for it): never negative, never beyond the tokens the reservation
//     held (the output cap, and the prompt estimate plus the cap in all),
//     and — where the caller counted what it relayed, as the gateway does
//     (Relayed) — a completion outside the tolerance of the relayed text
//     (its words to its bytes) is replaced by the caller's own count, and
//     a prompt below its text's words by the estimate. An engine or node
//     that reports 2^62 tokens, fewer than it streamed, or a negative
//     count is billed within those bounds, the correction logged and
//     reported (Outcome.Corrected), and
//     the row is closed: a settle never leaves a row reserved for its
//     numbers. Usage sums saturate rather than overflow.
//   - Settle bills Cost(usage) at the reserved prices, but never more than
//     the reservation: the client was promised at most that, and the
//     reservation is what admission checked against the balance.
//   - Settle debits unconditionally. The reservation guaranteed cover when it
//     was made; if an admin lowered the balance meanwhile (a negative credit
//     entry), the debit may take the balance below zero. The tokens were
//     produced, so the debt is recorded (Outcome.Overdrawn, a warning in the
//     log) and carried, and the next Reserve is refused until credit arrives.
//   - AddCredit is idempotent by key; negative amounts are corrections and
//     may make the balance negative, which the admin sees in Balance.
//   - Sweep settles reservations older than Config.SweepAfter from the node's
//     completion log, or cancels them, through the same Settle and Cancel.
//
// Each of these rules — the cost (Cost), the output clamp (clampOutput),
// the bound (BoundUsage), the partial rule (partialUsage) and the cap at
// the reservation (charge) — is defined once, as a Go function; the SQL
// the batches run is rendered from the function beside it (rules.go), and
// a differential test compares each rendering with its function over
// random inputs (rules_sql_test.go).
//
// On PostgreSQL concurrent reservations, and concurrent settles and cancels,
// are each combined into one statement and one commit (group commit,
// batch.go); what a batch cannot decide exactly goes on alone through the
// one-request transactions (reserveTx, finish), which are also the only
// paths on SQLite. No call waits past its context, also when the database is
// frozen: a call whose context ends while its batch runs returns
// ErrOutcomeUnknown (the batch may yet commit), one still queued is
// withdrawn and returns its context's error, having done nothing.
//
// Usage reports are scoped by the team id the caller took from the verified
// credential, never from the request. They read the usage_daily rollup
// (migration 0006) for whole UTC days and the ledger rows only for a partial
// day the range cuts; triggers on usage_ledger move the rollup in the
// transaction that settles a row (deferred to commit on PostgreSQL, after the
// team's row is locked), or, for a settle batch, the batch's statement
// folds its rows in one grouped upsert and the triggers leave those rows
// (migration 0007); so Usage and UsageByDay equal the GROUP BY over the
// ledger rows exactly, late settles included. The rollup is keyed by API key
// too (UsageByKey), and latency_hourly beside it holds, per team, UTC hour,
// model and key, the timing the gateway recorded with each settle
// (SettleTimed) as fixed histograms (TeamLatency, PlatformLatency), moved by
// the same triggers and batch statement (migration 0009).
package ledger
