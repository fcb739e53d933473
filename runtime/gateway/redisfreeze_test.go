package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// frozenRedisTimeout is the gateway's budget for a Redis call here: short,
// so that the frozen calls' 503s come without a long wait.
const frozenRedisTimeout = 200 * time.Millisecond

// TestFrozenRedis: with the quota Redis frozen, a request of a key with
// limits gets a 503 instead of waiting on Redis, and a key without limits
// is served. The Redis client here would wait an hour on a read of its
// own, so an answer at all shows the gateway's per-call deadline.
func TestFrozenRedis(t *testing.T) {
	s := newStack(t, stackOpts{})
	team := s.team("alpha", 10*credit)
	limited := s.key(adminwire.CreateKeyRequest{TeamID: team, MaxStreams: 5, RPM: 1000, TokensPerDay: 1_000_000})
	free := s.key(adminwire.CreateKeyRequest{TeamID: team})

	opts, err := redis.ParseURL(s.redis.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewFaultProxy(t, opts.Addr)
	opts.Addr = proxy.Addr()
	opts.ContextTimeoutEnabled = true
	opts.ReadTimeout, opts.WriteTimeout = time.Hour, time.Hour
	frozen := redis.NewClient(opts)
	t.Cleanup(func() { frozen.Close() })
	qcfg := quota.Config{Prefix: s.redis.Prefix}
	lim, err := quota.New(frozen, qcfg)
	if err != nil {
		t.Fatal(err)
	}
	q, err := quota.NewQueue(frozen, qcfg)
	if err != nil {
		t.Fatal(err)
	}
	// Keys, revocations and everything else stay on the reachable Redis.
	base := s.gateway(func(c *gateway.Config) {
		c.Limits, c.Refusals, c.Queue, c.RedisTimeout = lim, lim, q, frozenRedisTimeout
	})

	if resp, body := post(t, base, limited); resp.StatusCode != http.StatusOK {
		t.Fatalf("before the freeze: %d %s", resp.StatusCode, body)
	}
	proxy.Freeze()
	if resp, body := post(t, base, limited); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("limited key with Redis frozen: %d (Retry-After %q) %s; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, body := post(t, base, free); resp.StatusCode != http.StatusOK {
		t.Errorf("key without limits with Redis frozen: %d %s; want 200", resp.StatusCode, body)
	}
	proxy.Thaw()
}

// postLimit bounds post: far beyond a 503 after frozenRedisTimeout or a
// five-token answer on a loaded machine, so a gateway that waits on the
// frozen Redis fails the test instead of hanging the run.
const postLimit = 30 * time.Second

// post sends a short non-streamed completion, bounded by postLimit.
func post(t *testing.T, base, key string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), postLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(chatBody("llama-8b", false, 5)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}
