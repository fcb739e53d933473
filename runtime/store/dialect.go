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
