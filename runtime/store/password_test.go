package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// backendsGoneWait bounds the wait for terminated backends to leave
// pg_stat_activity: they exit within milliseconds; the slack is for a
// loaded machine.
const backendsGoneWait = 30 * time.Second

// TestPasswordRotation: a pool whose connections take their password from
// a source (Secrets Manager in production; a function here) keeps working
// when the role's password changes on a running PostgreSQL and every
// backend it had is killed, which makes it reconnect: at most the one
// statement that finds its connection dead fails, the reconnect itself
// succeeds by reading the password again after the server refuses the
// kept one, and the source is read once per rotation, not per connection.
func TestPasswordRotation(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	admin := openTest(t, dsn)
	role := "rotating_" + randomWord(t)
	exec(t, admin, "CREATE ROLE "+role+" LOGIN PASSWORD '"+randomWord(t)+"'")
	t.Cleanup(func() { exec(t, admin, "DROP ROLE IF EXISTS "+role) })
	requirePassword(t, admin, role)

	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	roleDSN := u.String()

	t.Run("the server checks the password", func(t *testing.T) {
		db, err := Open(ctx, roleDSN, WithPassword(PasswordFunc(func(context.Context) (string, error) { return "wrong", nil })))
		if err == nil {
			db.Close()
			t.Fatal("Open with a wrong password succeeded: the server does not check passwords, so this test proves nothing")
		}
		if !isInvalidPassword(err) {
			t.Fatalf("Open with a wrong password: %v, want SQLSTATE %s", err, pgInvalidPassword)
		}
	})

	var current atomic.Pointer[string]
	var reads atomic.Int64
	setPassword := func(pw string) {
		exec(t, admin, "ALTER ROLE "+role+" PASSWORD '"+pw+"'")
		current.Store(&pw)
	}
	setPassword(randomWord(t))
	src := PasswordFunc(func(context.Context) (string, error) {
		reads.Add(1)
		return *current.Load(), nil
	})
	db := openWith(t, roleDSN, WithPassword(src))
	if got := whoami(t, db); got != role {
		t.Fatalf("current_user = %q, want %q", got, role)
	}

	const rotations, statements = 3, 20
	for r := 1; r <= rotations; r++ {
		setPassword(randomWord(t))
		terminateBackends(t, admin, role)
		failed := 0
		for range statements {
			var got string
			if err := db.QueryRowContext(ctx, "SELECT current_user").Scan(&got); err != nil {
				failed++
				t.Logf("rotation %d: a statement failed: %v", r, err)
			}
		}
		if failed > 1 {
			t.Errorf("rotation %d: %d of %d statements failed, want at most 1 (the one on the killed connection)", r, failed, statements)
		}
		if got, want := reads.Load(), int64(r+1); got != want {
			t.Errorf("after rotation %d: the source was read %d times, want %d (once at the start, once per rotation)", r, got, want)
		}
	}
}

// TestPasswordSourceOutageIsUnavailable: a source that cannot be read
// makes the connection fail as an outage (503 and retry), not a refusal.
func TestPasswordSourceOutageIsUnavailable(t *testing.T) {
	dsn := testenv.Postgres(t)
	down := errors.New("secrets manager unreachable")
	db, err := Open(context.Background(), dsn, WithPassword(PasswordFunc(func(context.Context) (string, error) { return "", down })))
	if err == nil {
		db.Close()
		t.Fatal("Open with an unreadable password source succeeded")
	}
	if !errors.Is(err, ErrPasswordUnavailable) || !errors.Is(err, down) || !IsUnavailable(err) {
		t.Errorf("Open: %v, want ErrPasswordUnavailable wrapping the source's error, an outage", err)
	}
}

// TestPasswordSourceRefusesAmbiguousDSN: a password in the DSN next to a
// source, or a source for SQLite, is refused rather than one ignored.
func TestPasswordSourceRefusesAmbiguousDSN(t *testing.T) {
	src := WithPassword(PasswordFunc(func(context.Context) (string, error) { return "p", nil }))
	for _, dsn := range []string{"postgres://u:p@127.0.0.1:1/db", "sqlite::memory:"} {
		t.Run(dsn, func(t *testing.T) {
			db, err := Open(context.Background(), dsn, src)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrUnsupportedDSN) {
				t.Errorf("Open: %v, want ErrUnsupportedDSN", err)
			}
		})
	}
}

// requirePassword makes the server check role's password on TCP from
// the loopback (scram-sha-256), ahead of the test server's trust rules,
// and restores the rules when the test ends. The rule names role alone,
// so other tests' connections are unaffected.
func requirePassword(t *testing.T, admin *DB, role string) {
	t.Helper()
	var file, content string
	if err := admin.QueryRow("SELECT setting, pg_read_file(setting) FROM pg_settings WHERE name = 'hba_file'").Scan(&file, &content); err != nil {
		t.Fatalf("read pg_hba.conf (the test needs a superuser): %v", err)
	}
	var rules []string
	for line := range strings.SplitSeq(content, "\n") {
		line = strings.ReplaceAll(line, "\t", " ")
		if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
			rules = append(rules, line)
		}
	}
	writeHBA(t, admin, file, append([]string{"host all " + role + " 127.0.0.1/32 scram-sha-256"}, rules...))
	t.Cleanup(func() { writeHBA(t, admin, file, rules) })
}

// writeHBA writes lines as the server's pg_hba.conf and reloads it.
func writeHBA(t *testing.T, admin *DB, file string, lines []string) {
	t.Helper()
	body := strings.Join(lines, "\n")
	if strings.Contains(body, "$hba$") || strings.Contains(file, "'") {
		t.Fatalf("pg_hba.conf at %q cannot be quoted", file)
	}
	exec(t, admin, "COPY (SELECT l FROM unnest(string_to_array($hba$"+body+"$hba$, E'\\n')) WITH ORDINALITY AS h(l, n) ORDER BY n) TO '"+file+"'")
	var ok bool
	if err := admin.QueryRow("SELECT pg_reload_conf()").Scan(&ok); err != nil || !ok {
		t.Fatalf("reload pg_hba.conf: %v", err)
	}
	// The postmaster rereads the file on SIGHUP, asynchronously: wait until
	// the loaded rules are the written ones.
	testenv.EventuallyNil(t, backendsGoneWait, fmt.Sprintf("the %d written pg_hba.conf rules loaded", len(lines)), func() error {
		var n int
		if err := admin.QueryRow("SELECT count(*) FROM pg_hba_file_rules WHERE error IS NULL").Scan(&n); err != nil {
			t.Fatal(err)
		}
		var loaded int
		if err := admin.QueryRow("SELECT count(*) FROM pg_hba_file_rules").Scan(&loaded); err != nil {
			t.Fatal(err)
		}
		if n != len(lines) || loaded != len(lines) {
			return fmt.Errorf("%d rules loaded, %d valid", loaded, n)
		}
		return nil
	})
}

// terminateBackends kills every backend of role and waits until they are
// gone.
func terminateBackends(t *testing.T, admin *DB, role string) {
	t.Helper()
	exec(t, admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '"+role+"'")
	testenv.EventuallyNil(t, backendsGoneWait, "the backends of "+role+" gone after pg_terminate_backend", func() error {
		var n int
		if err := admin.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE usename = $1", role).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			return fmt.Errorf("%d backends still run", n)
		}
		return nil
	})
}

// openWith is openTest with options.
func openWith(t *testing.T, dsn string, opts ...Option) *DB {
	t.Helper()
	db, err := Open(context.Background(), dsn, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func whoami(t *testing.T, db *DB) string {
	t.Helper()
	var u string
	if err := db.QueryRow("SELECT current_user").Scan(&u); err != nil {
		t.Fatal(err)
	}
	return u
}

// randomWord is 16 random lowercase hex characters: a role name suffix or
// a password that needs no quoting.
func randomWord(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
