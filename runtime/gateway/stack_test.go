package gateway

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

// credit is one credit in micro-credits.
const credit = 1_000_000

// engineTimeScale is the simulated engine's speed: 200 times real time,
// so a test's answers take milliseconds.
const engineTimeScale = 200

// stack is what the lifecycle tests (lifecycle_test.go,
// lifecycle_close_test.go) run on: real PostgreSQL and Redis, a simulated
// llama-8b and one gateway, not served, whose parts a test's configure
// wraps. It exists because those tests build admissions in the gateway's
// internal states, which only this package reaches, and this package
// cannot import platformtest (platformtest → frontdoor → gateway). It wires
// only what an admission needs — keys, limits, the queue, the ledger, the
// catalog, the engine — and none of the front door's other parts; every
// other test runs on platformtest (platform_test.go).
type stack struct {
	t     *testing.T
	db    *store.DB
	led   *ledger.Ledger
	adm   *admin.SQLStore
	redis testenv.RedisEnv
	gw    *Server
}

// newStack starts a stack; configure adjusts its gateway's config last.
func newStack(t *testing.T, configure func(*Config)) *stack {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		http.DefaultClient.CloseIdleConnections() // keep-alive conns are not leaks
	})
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	led, err := ledger.New(db, ledger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, db: db, led: led, adm: admin.NewSQLStore(db), redis: testenv.Redis(t)}
	// 0.1 and 0.5 USD per million prompt and completion tokens.
	if _, _, err := s.adm.PutModel(ctx, "llama-8b", adminwire.ModelSpec{ServedName: "llama-8b", PromptPriceMicroPerMTok: 100_000,
		CompletionPriceMicroPerMTok: 500_000, MaxContextTokens: 8192, MaxOutputTokens: 4096}, time.Now()); err != nil {
		t.Fatal(err)
	}
	direct := engineclient.NewDirect(map[string][]engineclient.Target{"llama-8b": {{URL: s.startEngine("llama-8b"), ServedName: "llama-8b"}}}, nil)
	// Before the engine stops (cleanups run last first): a pooled
	// connection that never carried a request counts as active for five
	// seconds in an engine's graceful shutdown.
	t.Cleanup(direct.CloseIdleConnections)
	s.gw = s.gateway(direct, configure)
	return s
}

// startEngine runs a simulated engine for model until the test ends.
func (s *stack) startEngine(model string) string {
	dep, err := enginesim.Profile(model)
	if err != nil {
		s.t.Fatal(err)
	}
	sim, err := enginesim.New(enginesim.Config{Deployment: dep, ServedModelName: model, TimeScale: engineTimeScale, Seed: 7})
	if err != nil {
		s.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Serve(ctx, ln) }()
	s.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			s.t.Errorf("engine %s: %v", model, err)
		}
	})
	return "http://" + ln.Addr().String()
}

// gateway builds the stack's gateway on its database, Redis and engine;
// configure adjusts its config last.
func (s *stack) gateway(d dispatch.Dispatcher, configure func(*Config)) *Server {
	t := s.t
	rdb := s.redis.Client()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	keys, err := auth.NewKeyCache(auth.KeyCacheConfig{Store: s.adm, Redis: rdb, Prefix: s.redis.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = keys.Run(ctx) }()
	qcfg := quota.Config{Prefix: s.redis.Prefix}
	lim, err := quota.New(rdb, qcfg)
	if err != nil {
		t.Fatal(err)
	}
	q, err := quota.NewQueue(rdb, qcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Dispatcher: d, Catalog: NewCachedCatalog(s.adm.OpenAIModels, 0), Auth: &auth.Authenticator{Keys: keys},
		Limits: lim, Queue: q, Ledger: s.led, Quoter: s.led, URLGuard: &urlguard.Guard{Resolver: noDNS{}},
		Logger: slog.New(slog.DiscardHandler)}
	configure(&cfg)
	gw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Wait) // the last settles
	return gw
}

// team creates a team with credits.
func (s *stack) team(name string, credits int64) int64 {
	s.t.Helper()
	ctx := context.Background()
	tm, _, err := s.adm.CreateTeam(ctx, name, time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	if credits != 0 {
		if _, err := s.led.AddCredit(ctx, tm.ID, "grant-"+name, credits, "test"); err != nil {
			s.t.Fatal(err)
		}
	}
	return tm.ID
}

// post sends a chat completion with a key.
func (s *stack) post(ctx context.Context, url, key, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	return http.DefaultClient.Do(req)
}

// row is one usage_ledger row as the tests read it.
type row struct {
	status, from       string
	prompt, completion int64
	cost, reserved     int64
}

func (s *stack) ledgerRow(requestID string) (row, error) {
	var r row
	var from *string
	err := s.db.QueryRowContext(context.Background(),
		`SELECT status::text, settled_from::text, prompt_tokens, completion_tokens, cost_microcredits, reserved_microcredits
		 FROM usage_ledger WHERE request_id = $1`, requestID).Scan(&r.status, &from, &r.prompt, &r.completion, &r.cost, &r.reserved)
	if from != nil {
		r.from = *from
	}
	return r, err
}

// activeStreams counts the key's held stream slots in Redis: the members
// whose deadline (their score, in Redis's milliseconds) has not passed. An
// expired member holds nothing; the key's next admission removes it (a
// gateway's unused tickets end so).
func (s *stack) activeStreams(rdb *redis.Client, keyID int64) int64 {
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		s.t.Fatal(err)
	}
	n, err := rdb.ZCount(ctx, quota.NewKeys(s.redis.Prefix).Streams("key:"+itoa(keyID)),
		"("+strconv.FormatInt(now.UnixMilli(), 10), "+inf").Result()
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}
