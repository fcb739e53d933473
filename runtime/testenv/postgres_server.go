package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

const (
	// envDatabaseURL names a running PostgreSQL server (a postgres:// URL of
	// a role allowed to create databases) to use instead of starting one.
	envDatabaseURL = "LLMPLAT_TEST_DATABASE_URL"
	// postgresSuperuser is the superuser initdb creates; trust auth on
	// loopback lets it in without a password.
	postgresSuperuser = "postgres"
	// postgresAccount is the system account the server runs under when the
	// tests run as root, which PostgreSQL refuses.
	postgresAccount = "postgres"
	// postgresStartTimeout covers initdb and the first start on a busy
	// 2-core machine, where both take about a second when idle.
	postgresStartTimeout = 60 * time.Second
	// postgresMaxConnections leaves room for parallel tests that each hold
	// a pool of connections; the default of 100 is tight for that.
	postgresMaxConnections = 200
)

// postgresBinRoot is where Debian installs each PostgreSQL major version's
// programs, under <root>/<version>/bin, off the PATH. Tests change it to
// simulate a machine without PostgreSQL.
var postgresBinRoot = "/usr/lib/postgresql"

// postgresInstallHint tells a developer how to get a server.
const postgresInstallHint = "install PostgreSQL (Debian: apt-get install postgresql) or set " +
	envDatabaseURL + " to a postgres:// URL of a role that may create databases"

// findPostgresBin returns the directory holding initdb and postgres: the one
// of initdb on PATH, else the newest version under postgresBinRoot.
func findPostgresBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob(filepath.Join(postgresBinRoot, "*", "bin", "initdb"))
	sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	for _, m := range matches {
		dir := filepath.Dir(m)
		if isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", &missingError{
		service: "PostgreSQL",
		why:     "initdb and postgres found neither on PATH nor under " + filepath.Join(postgresBinRoot, "<version>", "bin"),
		hint:    postgresInstallHint,
	}
}

// versionOf returns the major version in <root>/<version>/bin/initdb, or -1.
func versionOf(initdb string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(initdb))), 64)
	if err != nil {
		return -1
	}
	return v
}

// isExecutable reports whether path is a regular file someone may execute.
func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// postgresCredential returns the account to run PostgreSQL as: nil (this
// process's own) unless the process is root.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(postgresAccount)
	if err != nil {
		return nil, &missingError{
			service: "PostgreSQL",
			why:     "the tests run as root, which PostgreSQL refuses, and there is no " + postgresAccount + " account to run it as",
			hint:    postgresInstallHint,
		}
	}
	uid, errU := strconv.Atoi(u.Uid)
	gid, errG := strconv.Atoi(u.Gid)
	if err := errors.Join(errU, errG); err != nil {
		return nil, fmt.Errorf("parse %s account ids: %w", postgresAccount, err)
	}
	return credential(uid, gid), nil
}

// startPostgres initialises a data directory in a new instance directory and
// starts a server on a free loopback port. The server and the returned
// admin pool are closed by Main.
func startPostgres(durable bool) (*pgServer, error) {
	bin, err := findPostgresBin()
	if err != nil {
		return nil, err
	}
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	sweepStale()
	dir, err := newInstanceDir("postgres")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := chownTree(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, errors.Join(fmt.Errorf("give instance directory to %s: %w", postgresAccount, err), os.RemoveAll(dir))
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", postgresSuperuser,
		"-E", "UTF8", "--no-locale", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, errors.Join(fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out))), os.RemoveAll(dir))
	}
	srv, port, err := startOnFreePort(func(port int) (*server, error) {
		return runPostgres(bin, dir, data, port, cred, durable)
	})
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	atShutdown(func() error { return errors.Join(srv.stop(), os.RemoveAll(dir)) })
	base := &url.URL{Scheme: "postgres", User: url.User(postgresSuperuser), Host: "127.0.0.1:" + strconv.Itoa(port),
		Path: "/postgres", RawQuery: "sslmode=disable"}
	pg, err := openAdmin(base)
	if err != nil {
		return nil, err
	}
	pg.proc = srv
	return pg, nil
}

// runPostgres starts the server on port and waits until it takes
// connections. Unless durable, the settings trade durability for speed:
// test data is thrown away.
func runPostgres(bin, dir, data string, port int, cred *syscall.Credential, durable bool) (*server, error) {
	args := []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=" + strconv.Itoa(postgresMaxConnections)}
	if durable {
		args = append(args, "-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "full_page_writes=on")
	} else {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "wal_level=minimal", "-c", "max_wal_senders=0")
	}
	s, err := startServer("postgres", dir, syscall.SIGQUIT, cred, filepath.Join(bin, "postgres"), args...)
	if err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", postgresSuperuser, port)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open postgres probe: %w", err), s.kill())
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), postgresStartTimeout)
	defer cancel()
	if err := s.waitReady(ctx, db.PingContext); err != nil {
		return nil, errors.Join(err, s.kill())
	}
	return s, nil
}
