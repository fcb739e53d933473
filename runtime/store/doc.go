// Package store opens the platform's SQL database and keeps its schema
// current.
//
// The same code runs on PostgreSQL (production and tests, through pgx's
// database/sql driver) and on embedded SQLite (the local mode, through the
// pure-Go modernc driver). Queries written for both follow a few rules:
//
//   - Placeholders are $1, $2, … in both dialects; SQLite reads $N as the
//     N-th argument, also when it is repeated or out of order.
//   - Times are passed as time.Time parameters (from an injected clock), not
//     computed with now() in SQL. SQLite keeps them as UTC text
//     ("2006-01-02 15:04:05.999999999+00:00"), which sorts in time order and
//     scans back into time.Time from the TIMESTAMP columns; an expression over
//     such a column (MAX(created_at)) scans as a string there.
//   - JSON columns (api_keys.model_allowlist, nodes.models) are JSON arrays
//     written and read as text: JSONB on PostgreSQL, checked TEXT on SQLite.
//   - Enumerations are ENUM types on PostgreSQL and TEXT with a CHECK on
//     SQLite; IsCheckViolation recognises a bad value in either.
//   - A SELECT that precedes an UPDATE in the same transaction appends
//     Dialect.ForUpdate(). SQLite transactions begin IMMEDIATE, so they
//     hold the write lock from their first statement.
//   - RETURNING and INSERT … ON CONFLICT work in both.
//
// In production the PostgreSQL password rotates (Aurora's managed master
// password, every seven days), so the processes are not given it: Open
// with WithPassword takes it from a PasswordSource (rdssecret reads the
// RDS-managed secret in Secrets Manager) when it opens a connection, keeps
// it, and on SQLSTATE 28P01 (password refused) reads it again and retries
// that connection once, through pgx's BeforeConnect. A rotation then costs
// no failed connection once the source has the new password; open
// connections are unaffected, and a source that cannot be read fails the
// connection as an outage (IsUnavailable, ErrPasswordUnavailable). Local
// mode and the tests use a plain DSN.
//
// Migrate applies the embedded, numbered migrations under migrations/<dialect>
// in order, each in its own transaction, and records them in
// schema_migrations. Money is integer micro-credits (1 credit = 1 USD =
// 1,000,000 micro-credits); prices are micro-credits per million tokens.
package store
