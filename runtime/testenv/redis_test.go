package testenv

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

func TestRedisEnvsAreIsolated(t *testing.T) {
	ctx := context.Background()
	var firstKey string
	t.Run("writes a key", func(t *testing.T) {
		env := Redis(t)
		if !strings.HasPrefix(env.URL, "redis://") || env.Addr == "" {
			t.Fatalf("env = %+v, want a redis:// URL and an address", env)
		}
		firstKey = env.Key("k")
		if err := env.Client().Set(ctx, firstKey, "v", 0).Err(); err != nil {
			t.Fatalf("set: %v", err)
		}
	})
	t.Run("does not see it", func(t *testing.T) {
		env := Redis(t)
		if strings.HasPrefix(firstKey, env.Prefix) {
			t.Fatalf("prefix %q is shared with key %q of another test", env.Prefix, firstKey)
		}
		c := env.Client()
		keys, err := c.Keys(ctx, env.Prefix+"*").Result()
		if err != nil {
			t.Fatalf("keys: %v", err)
		}
		if len(keys) != 0 {
			t.Errorf("fresh prefix holds keys %v", keys)
		}
		n, err := c.Exists(ctx, firstKey).Result()
		if err != nil {
			t.Fatalf("exists: %v", err)
		}
		if n != 0 {
			t.Errorf("key %s outlived the test that wrote it", firstKey)
		}
	})
}

func TestRedisCleanupDeletesOnlyThePrefix(t *testing.T) {
	ctx := context.Background()
	outside := Redis(t)
	c := outside.Client()
	keep := outside.Key("keep")
	if err := c.Set(ctx, keep, "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	var inner []string
	t.Run("many keys", func(t *testing.T) {
		env := Redis(t)
		c := env.Client()
		for i := range 2500 { // more than one SCAN batch
			k := env.Key("k" + strconv.Itoa(i))
			inner = append(inner, k)
			if err := c.Set(ctx, k, i, 0).Err(); err != nil {
				t.Fatalf("set: %v", err)
			}
		}
	})
	n, err := c.Exists(ctx, inner...).Result()
	if err != nil {
		t.Fatalf("exists: %v", err)
	}
	if n != 0 {
		t.Errorf("%d of %d keys outlived their test", n, len(inner))
	}
	if got, err := c.Get(ctx, keep).Result(); err != nil || got != "v" {
		t.Errorf("key of a running test = %q, %v; want \"v\"", got, err)
	}
}
