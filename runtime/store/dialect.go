package store

import "strconv"

// Dialect is the SQL flavour of a database.
type Dialect int

const (
	// Postgres is PostgreSQL, reached through pgx.
	Postgres Dialect = iota + 1
	// SQLite is the embedded SQLite of the local mode.
	SQLite
)

// String returns the dialect's name, which is also the name of its
// migrations folder.
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	default:
		return "dialect(" + strconv.Itoa(int(d)) + ")"
	}
}

// ForUpdate returns the clause that locks the rows a SELECT reads until the
// transaction ends: " FOR UPDATE" on PostgreSQL, nothing on SQLite, where
// the IMMEDIATE transaction already holds the database's write lock.
func (d Dialect) ForUpdate() string {
	if d == Postgres {
		return " FOR UPDATE"
	}
	return ""
}

// SaturatingSum returns the SQL aggregate of the sum of expr, a bigint
// column, as a bigint that never overflows: at most the largest bigint,
// never an error. Plain SUM fails both ways on a huge total — PostgreSQL's
// numeric sum cast back to bigint raises "out of range", SQLite's integer
// sum raises "integer overflow" — and a query that errs or wraps for one
// team's rows would answer that team 503, or a negative total, for good.
// PostgreSQL sums exactly in numeric and caps; SQLite sums in floating
// point (TOTAL, exact while the total stays below 2^53) and its cast to
// INTEGER saturates at the largest integer.
func (d Dialect) SaturatingSum(expr string) string {
	if d == Postgres {
		return "LEAST(SUM(" + expr + "), 9223372036854775807)::bigint"
	}
	return "CAST(TOTAL(" + expr + ") AS INTEGER)"
}
