package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver
)

// PostgresMaxConns bounds one process's PostgreSQL connections, all kept
// open once made: enough for a gateway's concurrent admissions and
// settles, and a handful of replicas stay under PostgreSQL's default
// max_connections of 100.
const PostgresMaxConns = 24

// PostgresConnectTimeout bounds one attempt at a PostgreSQL connection
// (the DSN's connect_timeout, unless it sets one): a connection takes a
// few round trips, and a frozen server (stopped, or behind a network that
// drops packets) accepts the TCP handshake and answers nothing, so without
// it the pool's own background opens, which have no deadline, would wait
// forever and hold their place in the pool.
const PostgresConnectTimeout = 5 * time.Second

// RequestBudget bounds the database work a client waits for in one
// request: a chat's quote and reservation, a usage report, a console
// page's reads and its session's key check. Each is a few indexed
// statements that answer in milliseconds (a group-commit batch under the
// heaviest measured load in well under a second), so five seconds without
// an answer means PostgreSQL is down or frozen — a stopped server or a
// black-holed network accepts bytes and answers nothing — and the client
// gets a 503 to retry instead of a wait for the thaw that holds a
// goroutine and a pooled connection.
const RequestBudget = 5 * time.Second

const (
	// sqliteBusyTimeout is how long an SQLite writer waits for another's
	// lock before failing: far longer than any transaction of the local
	// mode, so writers queue instead of failing.
	sqliteBusyTimeout = 10 * time.Second
	// sqliteMemory is the DSN path of a private in-memory database.
	sqliteMemory = ":memory:"
)

// DB is a database connection pool that knows its dialect. The embedded
// *sql.DB serves queries; Close closes it.
type DB struct {
	*sql.DB
	dialect Dialect
}

// Dialect returns the database's SQL flavour.
func (db *DB) Dialect() Dialect { return db.dialect }

// Open connects to the database named by dsn and checks that it answers.
// The forms are postgres://… or postgresql://… for PostgreSQL, and
// sqlite:<path> or sqlite::memory: for SQLite. SQLite connections run with
// WAL journaling, a busy timeout, foreign keys enforced and IMMEDIATE
// transactions; an in-memory database keeps a single connection, since
// each connection would otherwise see a database of its own.
//
// With WithPassword, PostgreSQL connections take their password from a
// source (Secrets Manager in production) rather than the DSN.
func Open(ctx context.Context, dsn string, opts ...Option) (*DB, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	t, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	sqlDB, err := openPool(t, o)
	if err != nil {
		return nil, err
	}
	switch {
	case t.singleConn:
		sqlDB.SetMaxOpenConns(1)
		sqlDB.SetMaxIdleConns(1)
	case t.dialect == Postgres:
		// database/sql keeps 2 idle connections by default: under
		// concurrent requests every other query opened and closed a
		// PostgreSQL connection. Keep the pool's connections open.
		sqlDB.SetMaxOpenConns(PostgresMaxConns)
		sqlDB.SetMaxIdleConns(PostgresMaxConns)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("connect %s: %w", t.dialect, err), sqlDB.Close())
	}
	return &DB{DB: sqlDB, dialect: t.dialect}, nil
}

// openPool makes t's database/sql pool, its PostgreSQL connections taking
// their password from o's source when one is given.
func openPool(t target, o options) (*sql.DB, error) {
	if o.password == nil {
		sqlDB, err := sql.Open(t.driver, t.source)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", t.dialect, err)
		}
		return sqlDB, nil
	}
	if t.dialect != Postgres {
		return nil, fmt.Errorf("%w: a password source applies to PostgreSQL only", ErrUnsupportedDSN)
	}
	c, err := passwordConnector(t.source, o.password)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// target is what a DSN resolves to.
type target struct {
	dialect    Dialect
	driver     string // database/sql driver name
	source     string // the driver's DSN
	singleConn bool   // the pool must keep exactly one connection
}

// parseDSN resolves a DSN of one of Open's forms.
func parseDSN(dsn string) (target, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		u, err := url.Parse(dsn)
		if err != nil {
			return target{}, fmt.Errorf("%w: %w", ErrUnsupportedDSN, err)
		}
		if q := u.Query(); !q.Has("connect_timeout") {
			q.Set("connect_timeout", strconv.Itoa(int(PostgresConnectTimeout/time.Second)))
			u.RawQuery = q.Encode()
		}
		return target{dialect: Postgres, driver: "pgx", source: u.String()}, nil
	case strings.HasPrefix(dsn, "sqlite:"):
		return sqliteTarget(strings.TrimPrefix(dsn, "sqlite:"))
	default:
		return target{}, fmt.Errorf("%w: want postgres://…, postgresql://…, sqlite:<path> or sqlite::memory:", ErrUnsupportedDSN)
	}
}

// sqliteTarget returns the modernc DSN for the database at path, with the
// settings Open promises applied to every connection.
func sqliteTarget(path string) (target, error) {
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") {
		return target{}, fmt.Errorf("%w: sqlite path %q must be a plain file path or %s", ErrUnsupportedDSN, path, sqliteMemory)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(sqliteBusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "foreign_keys(1)")
	memory := path == sqliteMemory
	if !memory {
		q.Add("_pragma", "journal_mode(WAL)")
		// NORMAL is durable against a crash of the process under WAL; only
		// a power loss can drop the last transactions.
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	q.Set("_txlock", "immediate")
	q.Set("_time_format", "sqlite")
	q.Set("_timezone", "UTC")
	return target{dialect: SQLite, driver: "sqlite", source: path + "?" + q.Encode(), singleConn: memory}, nil
}
