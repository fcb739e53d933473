package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
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
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
	"github.com/llmplat/llmplat/runtime/urlguard"
)

func TestMain(m *testing.M) { testenv.MainWithLeakCheck(m) }

// Test prices in micro-credits per million tokens: 0.1 USD per million
// prompt tokens and 0.5 USD per million completion tokens.
const (
	promptPrice     = 100_000
	completionPrice = 500_000
	credit          = 1_000_000 // one credit in micro-credits
)

// stackOpts shape a test platform.
type stackOpts struct {
	// engine, when set, serves llama-8b instead of a simulator: a
	// hand-written engine for streams the simulator does not make.
	engine http.Handler
	// wrapLedger, when set, wraps the ledger the gateways use.
	wrapLedger func(Ledger) Ledger
	// wrapLimits, when set, wraps the limiter the gateways use.
	wrapLimits func(Limiter) Limiter
}

// engineTimeScale is the simulated engines' speed: 200 times real time,
// so a test's answers take milliseconds.
const engineTimeScale = 200

// stack is the admission path on real PostgreSQL and Redis with a
// simulated engine per model, for the white-box tests only: they reach
// the gateway's internals, and this package cannot import platformtest
// (which imports it). Black-box tests use platformtest (platform_test.go).
type stack struct {
	t      *testing.T
	dsn    string // the test's database
	db     *store.DB
	led    *ledger.Ledger
	adm    *admin.SQLStore
	redis  testenv.RedisEnv
	sims   map[string]*enginesim.Sim
	direct *dispatch.Direct
	opts   stackOpts
	logs   *testenv.Buffer
	url    string // the first gateway's base URL
	// servers are the gateway replicas started, for settled.
	servers []*Server
}

// settled waits until every replica has finished the work it does after
// an answer (settles, token counts, queue wake-ups): what a test reads
// next then shows the requests it sent.
func (s *stack) settled() {
	for _, gw := range s.servers {
		gw.Wait()
	}
}

func newStack(t *testing.T, o stackOpts) *stack {
	t.Helper()
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	db, err := store.Open(ctx, dsn)
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
	s := &stack{t: t, dsn: dsn, db: db, led: led, adm: admin.NewSQLStore(db), redis: testenv.Redis(t),
		sims: map[string]*enginesim.Sim{}, opts: o, logs: &testenv.Buffer{}}
	targets := map[string][]dispatch.Target{}
	for _, name := range []string{"llama-8b", "qwen-32b"} {
		_, _, err := s.adm.PutModel(ctx, name, adminwire.ModelSpec{ServedName: name, PromptPriceMicroPerMTok: promptPrice,
			CompletionPriceMicroPerMTok: completionPrice, MaxContextTokens: 8192, MaxOutputTokens: 4096}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var url string
		if o.engine != nil && name == "llama-8b" {
			srv := httptest.NewServer(o.engine)
			t.Cleanup(srv.Close)
			url = srv.URL
		} else {
			url = s.startEngine(name)
		}
		targets[name] = []dispatch.Target{{URL: url, ServedName: name}}
	}
	s.direct = dispatch.NewDirect(targets, nil)
	// Before the engines stop (cleanups run last first): a pooled
	// connection that never carried a request counts as active for five
	// seconds in an engine's graceful shutdown.
	t.Cleanup(s.direct.CloseIdleConnections)
	s.url = s.gateway()
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
	s.sims[model] = sim
	return "http://" + ln.Addr().String()
}

// gateway starts one more gateway replica on the shared database, Redis
// and engines, with its own Redis clients and key cache, as a separate
// process would have, and returns its base URL. configure adjusts its
// config last.
func (s *stack) gateway(configure ...func(*Config)) string {
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
	var limits Limiter = lim
	if s.opts.wrapLimits != nil {
		limits = s.opts.wrapLimits(limits)
	}
	var led Ledger = s.led
	if s.opts.wrapLedger != nil {
		led = s.opts.wrapLedger(led)
	}
	cfg := Config{
		Dispatcher: s.direct,
		Catalog:    NewCachedCatalog(s.adm.OpenAIModels, 0),
		Auth:       &auth.Authenticator{Keys: keys},
		Limits:     limits,
		Queue:      q,
		Ledger:     led,
		Quoter:     s.led,
		URLGuard:   &urlguard.Guard{Resolver: noDNS{}},
		Logger:     slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range configure {
		f(&cfg)
	}
	gw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	s.servers = append(s.servers, gw)
	t.Cleanup(gw.Wait) // after the server closed: the last settles
	t.Cleanup(srv.Close)
	return srv.URL
}

// noDNS resolves nothing: tests never leave the machine.
type noDNS struct{}

func (noDNS) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return nil, errors.New("no DNS in tests")
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

// key creates an API key and returns its secret.
func (s *stack) key(req adminwire.CreateKeyRequest) string {
	s.t.Helper()
	k, err := s.adm.CreateKey(context.Background(), req, "", time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	return k.Secret
}

// post sends a chat completion with a key.
func (s *stack) post(ctx context.Context, url, key, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return http.DefaultClient.Do(req)
}

// do posts and reads the whole answer.
func (s *stack) do(key, body string) (*http.Response, string) {
	s.t.Helper()
	resp, err := s.post(context.Background(), s.url, key, body)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
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

// ledgerBehindProxy returns a ledger that reaches the stack's database
// through a fault proxy, for a gateway whose database the test takes
// down or freezes; the test itself still reads the database directly.
func (s *stack) ledgerBehindProxy() (*testenv.FaultProxy, *ledger.Ledger) {
	s.t.Helper()
	u, err := url.Parse(s.dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	proxy := testenv.NewFaultProxy(s.t, u.Host)
	u.Host = proxy.Addr()
	db, err := store.Open(context.Background(), u.String())
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { db.Close() })
	led, err := ledger.New(db, ledger.Config{})
	if err != nil {
		s.t.Fatal(err)
	}
	return proxy, led
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
