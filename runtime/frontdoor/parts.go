package frontdoor

import (
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/settlelog"
	"github.com/llmplat/llmplat/runtime/store"
)

// NewLedger builds the ledger a front door settles in, as every process
// that runs one wires it: the sweeper settles an orphaned row from the
// gateway's kept settle when the database refused it, else from a node's
// done record, and counts a swept row's tokens on its key's day.
func NewLedger(db *store.DB, rdb redis.UniversalClient, prefix string, logger *slog.Logger) (*ledger.Ledger, error) {
	swept, err := SweptTokens(rdb, prefix, logger)
	if err != nil {
		return nil, err
	}
	logs := ledger.CompletionLogs{settlelog.New(rdb, prefix, logger), orchestrator.NewCompletionLog(rdb, prefix)}
	return ledger.New(db, ledger.Config{Completions: logs, Logger: logger, SweptSettle: swept})
}

// NewDirect is the dispatcher of a gateway without orchestrators: it sends
// each model's requests straight to its engines, under the served name the
// admin API declares for a target that names none.
func NewDirect(engines map[string][]engineclient.Target, db *store.DB) *engineclient.Direct {
	d := engineclient.NewDirect(engines, nil)
	d.UseServedNames(engineclient.NewServedNames(admin.NewSQLStore(db).ServedNames))
	return d
}
