package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/engineclient"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// Test prices in micro-credits per million tokens: the platform's.
const (
	promptPrice     = platformtest.PromptPrice
	completionPrice = platformtest.CompletionPrice
	credit          = 1_000_000 // one credit in micro-credits
)

// Row wait bounds: a settle lands a moment after its answer, a slot is
// given back as the response ends or, when Redis is too busy to answer in
// time, by a retry in the background.
const (
	rowWait  = 10 * time.Second
	slotWait = 30 * time.Second
)

// stackOpts shape a test platform.
type stackOpts struct {
	timeScale         float64       // engine speed; 0 means 200× real time
	maxInFlight       int           // per engine; 0 means no cap
	queueLimit        time.Duration // 0 means the default
	firstTokenTimeout time.Duration
	streamIdleTimeout time.Duration
	// maxRequestDuration is the gateways'; 0 means the default.
	maxRequestDuration time.Duration
	faults             enginesim.Faults
	// engine, when set, serves llama-8b instead of a simulator: a
	// hand-written engine for streams the simulator does not make.
	engine http.Handler
	// wrapLedger, when set, wraps the ledger the gateways use.
	wrapLedger func(gateway.Ledger) gateway.Ledger
	// wrapLimits, when set, wraps the limiter the gateways use.
	wrapLimits func(gateway.Limiter) gateway.Limiter
	// redisTimeout, when set, replaces the gateways' budget for a Redis
	// call: a test of a limit under a burst of hundreds of requests on a
	// loaded machine must not turn into a test of that budget, whose
	// honest answer when exceeded is a 503.
	redisTimeout time.Duration
	// proxied puts PostgreSQL and Redis behind the platform's fault
	// proxies (s.p.PostgresProxy, s.p.RedisProxy): a test that freezes the
	// database freezes it for every part, as an outage does.
	proxied bool
}

// stack is the platform (platformtest.Start) with gateways that dispatch
// straight to an engine per model, as a gateway started with -engine
// does, and the reads the gateway's tests make of it.
type stack struct {
	t      *testing.T
	p      *platformtest.Platform
	db     *store.DB
	led    *ledger.Ledger
	adm    *admin.SQLStore
	redis  testenv.RedisEnv
	sims   map[string]*enginesim.Sim
	direct dispatch.Dispatcher // the gateways' dispatcher
	logs   *testenv.Buffer
	url    string // the first gateway's base URL
}

func newStack(t *testing.T, o stackOpts) *stack {
	t.Helper()
	if o.timeScale == 0 {
		o.timeScale = 200
	}
	// Keep-alive conns are not leaks; registered first, so it runs last.
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	s := &stack{t: t, sims: map[string]*enginesim.Sim{}, logs: &testenv.Buffer{}}
	engines := map[string][]engineclient.Target{}
	for _, name := range []string{"llama-8b", "qwen-32b"} {
		var url string
		if o.engine != nil && name == "llama-8b" {
			url = platformtest.Serve(t, o.engine)
		} else {
			dep, err := enginesim.Profile(name)
			if err != nil {
				t.Fatal(err)
			}
			s.sims[name], url = platformtest.ServeSim(t, enginesim.Config{Deployment: dep, ServedModelName: name,
				TimeScale: o.timeScale, Seed: 7, Faults: o.faults})
		}
		engines[name] = []engineclient.Target{{URL: url, ServedName: name, MaxInFlight: o.maxInFlight}}
	}
	s.p = platformtest.Start(t, platformtest.Options{Engines: engines, QueueLimit: o.queueLimit,
		FirstTokenTimeout: o.firstTokenTimeout, StreamIdleTimeout: o.streamIdleTimeout, RedisTimeout: o.redisTimeout,
		Proxied: o.proxied,
		Logger:  slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Gateway: func(c *gateway.Config) {
			if o.maxRequestDuration != 0 {
				c.MaxRequestDuration = o.maxRequestDuration
			}
			if o.wrapLedger != nil {
				c.Ledger = o.wrapLedger(c.Ledger)
			}
			if o.wrapLimits != nil {
				c.Limits = o.wrapLimits(c.Limits)
			}
			s.direct = c.Dispatcher
		}})
	s.db, s.led, s.adm, s.redis, s.url = s.p.DB, s.p.Ledger, s.p.Admin, s.p.Redis, s.p.URL
	for _, name := range []string{"llama-8b", "qwen-32b"} {
		_, _, err := s.adm.PutModel(context.Background(), name, adminwire.ModelSpec{ServedName: name, PromptPriceMicroPerMTok: promptPrice,
			CompletionPriceMicroPerMTok: completionPrice, MaxContextTokens: 8192, MaxOutputTokens: 4096}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// settled waits until every gateway has finished the work it does after
// an answer (platformtest.Platform.Settled).
func (s *stack) settled() { s.p.Settled() }

// gateway starts one more gateway (platformtest.Platform.StartGateway) and
// returns its base URL; configure adjusts its config last.
func (s *stack) gateway(configure ...func(*gateway.Config)) string {
	s.t.Helper()
	return s.p.StartGateway(configure...)
}

// team creates a team with credits.
func (s *stack) team(name string, credits int64) int64 {
	s.t.Helper()
	return s.p.Team(name, credits)
}

// key creates an API key and returns its secret.
func (s *stack) key(req adminwire.CreateKeyRequest) string {
	s.t.Helper()
	return s.p.Key(req)
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

// waitRow waits until the request's row has left 'reserved'.
func (s *stack) waitRow(requestID string) row {
	s.t.Helper()
	var r row
	var err error
	testenv.EventuallyWithin(s.t, rowWait, "row "+requestID+" to leave reserved", func() bool {
		r, err = s.ledgerRow(requestID)
		return err == nil && r.status != "reserved"
	})
	return r
}

// ledgerBehindProxy returns a ledger that reaches the stack's database
// through a fault proxy, for a gateway whose database the test takes
// down or freezes; the test itself still reads the database directly.
func (s *stack) ledgerBehindProxy() (*testenv.FaultProxy, *ledger.Ledger) {
	s.t.Helper()
	u, err := url.Parse(s.p.DSN)
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

// waitSlotsFree waits until the key holds no stream slot and returns the
// count it last saw. A slot is given back as the response ends, or, when
// Redis is too busy to answer in time, by a retry in the background:
// either way it is free soon after, never necessarily at once.
func (s *stack) waitSlotsFree(rdb *redis.Client, keyID int64) int64 {
	s.t.Helper()
	deadline := time.Now().Add(slotWait)
	for {
		n := s.activeStreams(rdb, keyID)
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond) // a poll's pause
	}
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
	n, err := rdb.ZCount(ctx, quota.NewKeys(s.redis.Prefix).Streams("key:"+strconv.FormatInt(keyID, 10)),
		"("+strconv.FormatInt(now.UnixMilli(), 10), "+inf").Result()
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}
