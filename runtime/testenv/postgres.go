package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// databaseOpTimeout bounds creating or dropping one test database; both
	// take 5-250 ms depending on the disk.
	databaseOpTimeout = 30 * time.Second
	// databaseNameStem is how much of the test name goes into its database
	// name, to find it when debugging; PostgreSQL allows 63 bytes in all.
	databaseNameStem = 40
	// fileCopyMinVersion is the first server_version_num with CREATE
	// DATABASE … STRATEGY.
	fileCopyMinVersion = 150000
)

// pgServer is the PostgreSQL server this process uses, started by the
// harness or named by envDatabaseURL.
type pgServer struct {
	admin *sql.DB // on the server's maintenance database, for CREATE/DROP DATABASE
	base  url.URL // the admin DSN; a test's DSN differs only in its path
	where string  // how the server came to be, for the log
	proc  *server // nil for a server named by envDatabaseURL
	// createSuffix ends CREATE DATABASE: template0 is pristine (an external
	// server's template1 may hold extras), and a file copy (PostgreSQL 15
	// and later) takes a third of the default WAL-logged copy's time
	// (10 ms against 25-30 ms, measured on tmpfs).
	createSuffix string
}

// pgState holds the outcome of the process's one attempt to get a server.
type pgState struct {
	once   sync.Once
	srv    *pgServer
	err    error
	took   time.Duration
	logged atomic.Bool
}

// fast is the server tests share: durability traded for speed. durable is
// a server as production runs one (fsync, synchronous commit, full page
// writes), started only for a benchmark that asks.
var fast, durable pgState

// Postgres returns the DSN (postgres://…) of a new, empty database private
// to tb, dropped when tb ends. The first call in a process starts the
// server (or connects to the one named by LLMPLAT_TEST_DATABASE_URL). The
// server does not sync to disk: test data is thrown away.
func Postgres(tb testing.TB) string {
	tb.Helper()
	return database(tb, &fast, false)
}

// DurablePostgres is Postgres on a server of its own that commits as
// production does: every commit synced to disk (fsync and synchronous
// commit on, full page writes). Benchmarks of the ledger's commit path use
// it; a test needs no durability.
func DurablePostgres(tb testing.TB) string {
	tb.Helper()
	return database(tb, &durable, true)
}

func database(tb testing.TB, st *pgState, sync bool) string {
	tb.Helper()
	requireMain(tb)
	st.once.Do(func() {
		start := time.Now()
		if raw := os.Getenv(envDatabaseURL); raw != "" {
			st.srv, st.err = externalPostgres(raw)
		} else {
			st.srv, st.err = startPostgres(sync)
		}
		st.took = time.Since(start)
	})
	srv, err := st.srv, st.err
	var missing *missingError
	if errors.As(err, &missing) {
		reportMissing(tb, missing)
		return ""
	}
	if err != nil {
		tb.Fatalf("testenv: PostgreSQL: %v", err)
	}
	if st.logged.CompareAndSwap(false, true) {
		kind := ""
		if sync {
			kind = ", durable"
		}
		tb.Logf("testenv: PostgreSQL (%s%s) ready in %v", srv.where, kind, st.took.Round(time.Millisecond))
	}
	name := databaseName(tb.Name())
	if err := srv.createDatabase(name); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(func() {
		if err := srv.dropDatabase(name); err != nil {
			tb.Errorf("testenv: %v", err)
		}
	})
	dsn := srv.base
	dsn.Path = "/" + name
	return dsn.String()
}

// createDatabase creates an empty database.
func (s *pgServer) createDatabase(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), databaseOpTimeout)
	defer cancel()
	if _, err := s.admin.ExecContext(ctx, "CREATE DATABASE "+quoteIdent(name)+s.createSuffix); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// dropDatabase drops a test's database, ending the sessions the test left
// open.
func (s *pgServer) dropDatabase(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), databaseOpTimeout)
	defer cancel()
	if _, err := s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// externalPostgres uses the server at raw, a postgres:// URL.
func externalPostgres(raw string) (*pgServer, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("%s must be a postgres:// URL", envDatabaseURL)
	}
	srv, err := openAdmin(u)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envDatabaseURL, err)
	}
	srv.where = envDatabaseURL
	return srv, nil
}

// openAdmin connects to the server at base and registers the pool's close
// with Main.
func openAdmin(base *url.URL) (*pgServer, error) {
	db, err := sql.Open("pgx", base.String())
	if err != nil {
		return nil, fmt.Errorf("open admin connection: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), databaseOpTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("connect admin: %w", err), db.Close())
	}
	var version int
	if err := db.QueryRowContext(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return nil, errors.Join(fmt.Errorf("query server version: %w", err), db.Close())
	}
	suffix := " TEMPLATE template0"
	if version >= fileCopyMinVersion {
		suffix += " STRATEGY FILE_COPY"
	}
	atShutdown(db.Close)
	return &pgServer{admin: db, base: *base, where: "started by the harness", createSuffix: suffix}, nil
}

// databaseName returns a fresh database name that starts with the test's
// name, lowercased and reduced to letters, digits and underscores.
func databaseName(testName string) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 2+databaseNameStem {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	b.WriteByte('_')
	b.WriteString(randomHex(4))
	return b.String()
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
