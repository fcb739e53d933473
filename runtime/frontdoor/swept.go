package frontdoor

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
)

// sweptCountTimeout bounds counting one swept row's tokens.
const sweptCountTimeout = 2 * time.Second

// SweptTokens returns the ledger's SweptSettle hook: a row the sweeper
// settled counts its tokens on its API key's day, once per request (the
// gateway that settles a row counts it the same way). Rows of JWT callers
// carry no key and count nothing: their quota identity is not in the row.
func SweptTokens(rdb redis.UniversalClient, prefix string, logger *slog.Logger) (func(context.Context, ledger.Outcome), error) {
	lim, err := quota.New(rdb, quota.Config{Prefix: prefix, Logger: logger})
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, o ledger.Outcome) {
		if o.KeyID == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, sweptCountTimeout)
		defer cancel()
		// "key:<id>" is auth.Principal.QuotaID of an API key.
		if _, err := lim.CountTokens(ctx, "key:"+strconv.FormatInt(o.KeyID, 10), o.RequestID, o.Usage.PromptTokens+o.Usage.CompletionTokens); err != nil {
			logger.Warn("tokens-per-day counter not updated for a swept row", "request_id", o.RequestID, "err", err)
		}
	}, nil
}
