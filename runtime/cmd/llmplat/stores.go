package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/store"
)

// openStores opens and migrates the database and connects to Redis; the
// caller closes both.
func openStores(ctx context.Context, dbURL, redisURL string) (*store.DB, *redis.Client, error) {
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
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		return nil, nil, err
	}
	if err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, redis.NewClient(opts), nil
}
