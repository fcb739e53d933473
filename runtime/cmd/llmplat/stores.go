package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/rdssecret"
	"github.com/llmplat/llmplat/runtime/store"
)

// dbSecretEnv names the ARN of the Secrets Manager secret holding the
// database password: not a secret itself, so a flag may carry it too.
const dbSecretEnv = "LLMPLAT_DATABASE_PASSWORD_SECRET"

// openStores opens and migrates the database and connects to Redis; the
// caller closes both. With passwordSecret (a Secrets Manager ARN), the
// database password is read from that secret, and read again after a
// rotation, instead of from dbURL.
func openStores(ctx context.Context, dbURL, passwordSecret, redisURL string) (*store.DB, *redis.Client, error) {
	if dbURL == "" || redisURL == "" {
		return nil, nil, errors.New("-database-url and -redis-url (or LLMPLAT_DATABASE_URL and LLMPLAT_REDIS_URL) are required")
	}
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("redis url: %w", err)
	}
	// Request paths bound each Redis call with a context deadline; go-redis
	// applies it to the socket only when asked to.
	opts.ContextTimeoutEnabled = true
	var dbOpts []store.Option
	if passwordSecret != "" {
		src, err := rdssecret.Load(ctx, passwordSecret)
		if err != nil {
			return nil, nil, err
		}
		dbOpts = append(dbOpts, store.WithPassword(src))
	}
	db, err := store.Open(ctx, dbURL, dbOpts...)
	if err != nil {
		return nil, nil, err
	}
	if err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, redis.NewClient(opts), nil
}
