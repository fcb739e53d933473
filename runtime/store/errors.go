package store

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var (
	// ErrUnsupportedDSN means Open was given a DSN of no known form.
	ErrUnsupportedDSN = errors.New("unsupported database DSN")
	// ErrSchemaTooNew means the database was migrated by a newer binary
	// than this one; running on it could corrupt data.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
	// ErrBadMigrations means the embedded migrations are malformed.
	ErrBadMigrations = errors.New("bad migrations")
)

// PostgreSQL error codes (SQLSTATE) the callers classify.
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
	pgCheckViolation      = "23514"
	pgInvalidText         = "22P02" // a value outside an ENUM, among others
)

// IsUniqueViolation reports whether err comes from inserting a duplicate
// into a UNIQUE or PRIMARY KEY column, on either dialect.
func IsUniqueViolation(err error) bool {
	return hasPGCode(err, pgUniqueViolation) ||
		hasSQLiteCode(err, sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

// IsForeignKeyViolation reports whether err comes from a row that points at
// a missing parent, on either dialect.
func IsForeignKeyViolation(err error) bool {
	return hasPGCode(err, pgForeignKeyViolation) || hasSQLiteCode(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY)
}

// IsCheckViolation reports whether err comes from a value a column refuses:
// a CHECK constraint on either dialect, or a value outside an ENUM type on
// PostgreSQL.
func IsCheckViolation(err error) bool {
	return hasPGCode(err, pgCheckViolation, pgInvalidText) || hasSQLiteCode(err, sqlite3.SQLITE_CONSTRAINT_CHECK)
}

// hasPGCode reports whether err wraps a PostgreSQL error with one of codes.
func hasPGCode(err error, codes ...string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	for _, c := range codes {
		if pgErr.Code == c {
			return true
		}
	}
	return false
}

// hasSQLiteCode reports whether err wraps an SQLite error with one of the
// extended result codes.
func hasSQLiteCode(err error, codes ...int) bool {
	var sqErr *sqlite.Error
	if !errors.As(err, &sqErr) {
		return false
	}
	for _, c := range codes {
		if sqErr.Code() == c {
			return true
		}
	}
	return false
}

// IsUnavailable reports whether err means the database could not be
// reached or is not serving now (connection refused or lost, shutting
// down, too many connections, a busy SQLite file), as opposed to a
// statement it refused: such a failure is an outage to answer with 503 and
// retry later, not a 500.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, ErrPasswordUnavailable), errors.As(err, &connErr), errors.As(err, &netErr), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed), pgconn.Timeout(err):
		return true
	case errors.As(err, &pgErr):
		// Class 08 (connection exception), 53 (insufficient resources),
		// 57P01–57P03 (shutting down, cannot connect now).
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "53") ||
			pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	return isSQLitePrimary(err, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
}

// isSQLitePrimary reports whether err wraps an SQLite error whose primary
// result code (the low byte of the extended code) is one of codes.
func isSQLitePrimary(err error, codes ...int) bool {
	var sqErr *sqlite.Error
	if !errors.As(err, &sqErr) {
		return false
	}
	for _, c := range codes {
		if sqErr.Code()&0xff == c {
			return true
		}
	}
	return false
}
