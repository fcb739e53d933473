// Package settlelog keeps the settles the database could not take: a
// gateway that delivered tokens while PostgreSQL was down writes the
// request's exact counts to Redis, where they outlive the gateway process,
// and a replayer applies them, idempotently by request id, once the
// database is back. The ledger's sweeper reads them too, so a row whose
// tokens were delivered is settled from the gateway's counts, never
// cancelled for free.
package settlelog
