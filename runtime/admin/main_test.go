package admin

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
	"io"
)

func TestMain(m *testing.M) { testenv.MainWithLeakCheck(m) }

// dialectCase is one database to run a contract test against.
type dialectCase struct {
	name string
	dsn  func(t *testing.T) string
}

// dialectCases are PostgreSQL from testenv and an SQLite file.
var dialectCases = []dialectCase{
	{name: "postgres", dsn: func(t *testing.T) string { return testenv.Postgres(t) }},
	{name: "sqlite", dsn: func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "admin.db") }},
}

// migratedDB opens and migrates dsn, and closes it when the test ends.
func migratedDB(t *testing.T, dsn string) *store.DB {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}

// testStart is where a test's fake clock starts.
var testStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// debugLogger returns a debug-level logger writing into w, so tests can
// search the log lines for secrets.
func debugLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// assertNoSecret fails t if text holds secret or any 12-character piece of
// the part after its prefix.
func assertNoSecret(t *testing.T, where, text, secret string) {
	t.Helper()
	const window = 12
	if secret == "" {
		t.Fatalf("%s: empty secret to look for", where)
	}
	body := secret[strings.IndexByte(secret, '_')+1:]
	for i := 0; i+window <= len(body); i++ {
		if strings.Contains(text, body[i:i+window]) {
			t.Fatalf("%s contains a piece of a secret (%q)", where, body[i:i+window])
		}
	}
}

// itoa formats an id.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
