package console_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/console"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// openDatabase returns a migrated platform database of the test's own
// with its directory and ledger, for a console served without the rest
// of the platform (a fake clock, an authenticator of the test's choice).
func openDatabase(t *testing.T) (*store.DB, *admin.SQLStore, *ledger.Ledger) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return db, admin.NewSQLStore(db), l
}

// serveConsole serves a console built from cfg, its sessions in the
// test's Redis, until the test ends, and returns its base URL.
func serveConsole(t *testing.T, cfg console.Config) string {
	t.Helper()
	rdb := testenv.Redis(t)
	cfg.Redis, cfg.Prefix = rdb.Client(), rdb.Prefix
	web, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	web.Register(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}
