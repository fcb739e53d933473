package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/settlelog"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// Bounds of the frozen PostgreSQL, with slack for a loaded machine.
const (
	// frozenAnswerWithin bounds a request while PostgreSQL is frozen: the
	// gateway's ledger budget, a model-list load (2 s) within the slack.
	frozenAnswerWithin = gateway.DefaultLedgerTimeout + 5*time.Second
	// keptWithin bounds how long after its answer a settle the frozen
	// database could not take is in the settle log: the gateway's settle
	// budget (10 s), then the keep (2 s), and slack.
	keptWithin = 12*time.Second + 3*time.Second
)

// outageRequest is one closed-loop request of TestDatastoreOutage, as its
// client saw it.
type outageRequest struct {
	start, end time.Time
	status     string
	id         string // X-Request-Id
	completion int64  // the completion tokens a 200's answer delivered
	keptAfter  time.Duration
}

// TestDatastoreOutage: under a steady load, Redis — then, separately,
// PostgreSQL — goes away (every connection cut and new ones refused, as
// a restart looks to its clients) and comes back; Redis comes back empty,
// as one without persistence does (node records, slots, counters, queues
// and the settle log gone). Then PostgreSQL freezes instead (its
// connections stay open and every byte is held, as a stopped server, a
// black-holed network or a hung failover looks to its clients) and thaws.
// Clients get answers or clear 503s, never another status — while
// PostgreSQL is frozen, each within the gateway's bound, none hangs; the
// settles a frozen database cannot take are in the settle log within the
// settle's bound; service comes back by itself; and once the settles the
// outage held back are in, the ledger's invariant holds with no
// reservation left open and every token delivered to a client billed.
func TestDatastoreOutage(t *testing.T) {
	for _, which := range []string{"redis", "postgres", "postgres-frozen"} {
		t.Run(which, func(t *testing.T) {
			frozen := which == "postgres-frozen"
			outage := time.Duration(size(t, 2, 10)) * time.Second
			if frozen {
				// Longer than keptWithin, so that the settles of the answers
				// in flight when it froze are kept while it is frozen.
				outage = 16 * time.Second
			}
			p := platformtest.Start(t, platformtest.Options{StreamIdleTimeout: time.Hour, Proxied: true})
			p.Model(model, model)
			p.StartNode("node-1", model, enginesim.Config{ServedModelName: model, Seed: 1, TimeScale: 50}, 256)
			key, client := tenant(t, p, adminwire.CreateKeyRequest{RPM: 1_000_000, MaxStreams: 1000})
			proxy := p.RedisProxy
			if which != "redis" {
				proxy = p.PostgresProxy
			}
			var (
				mu     sync.Mutex
				reqs   []*outageRequest
				lastOK time.Time
				stop   atomic.Bool // the clients stop between requests: none is cut
				wg     sync.WaitGroup
			)
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; !stop.Load(); i++ {
						r := outageRequest{start: time.Now(), status: "error"}
						resp, err := post(context.Background(), client, p.URL, key, fmt.Sprintf(
							`{"model":%q,"max_tokens":5,"messages":[{"role":"user","content":"load %d %d"}]}`, model, w, i))
						if err == nil {
							r.status, r.id = resp.Status, resp.Header.Get("X-Request-Id")
							body, rerr := io.ReadAll(resp.Body)
							resp.Body.Close()
							if resp.StatusCode == http.StatusOK {
								var answer struct {
									Usage struct {
										CompletionTokens int64 `json:"completion_tokens"`
									} `json:"usage"`
								}
								if rerr != nil || json.Unmarshal(body, &answer) != nil {
									r.status = "200 with an unreadable body"
								}
								r.completion = answer.Usage.CompletionTokens
							}
						}
						r.end = time.Now()
						mu.Lock()
						reqs = append(reqs, &r)
						if r.status == "200 OK" {
							lastOK = r.end
						}
						mu.Unlock()
						if r.status != "200 OK" {
							time.Sleep(20 * time.Millisecond) // pacing after a refusal, not a wait for a condition
						}
					}
				}()
			}
			okSince := func(t0 time.Time) bool {
				mu.Lock()
				defer mu.Unlock()
				return lastOK.After(t0)
			}
			testenv.EventuallyNil(t, 30*time.Second, "a request served before the outage", func() error {
				if okSince(time.Time{}) {
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				if len(reqs) == 0 {
					return errors.New("no request answered")
				}
				return fmt.Errorf("%d requests answered, none served; the last: %s", len(reqs), reqs[len(reqs)-1].status)
			})
			time.Sleep(time.Second) // a second of load before the outage: the scenario's input
			began := time.Now()
			switch {
			case frozen:
				proxy.Freeze()
			default:
				proxy.Cut()
			}
			if which == "redis" {
				// A restart of a Redis without persistence: its data is
				// gone when it comes back.
				p.LoseRedisData()
			}
			if frozen {
				watchKept(p, &mu, &reqs, began, began.Add(outage))
			} else {
				time.Sleep(outage) // the outage's length: the scenario's input, not a wait for a condition
			}
			if frozen {
				proxy.Thaw()
			} else {
				proxy.Restore()
			}
			restored := time.Now()
			for deadline := time.Now().Add(2 * time.Minute); !okSince(restored); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no request served in 2 minutes after %s came back", which)
				}
			}
			recovery := time.Since(restored)
			time.Sleep(time.Second) // a second of load after the recovery: the scenario's input
			stop.Store(true)
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			statuses := map[string]int{}
			var delivered int64
			var slowest time.Duration
			for _, r := range reqs {
				statuses[r.status]++
				delivered += r.completion
				if r.end.After(began) && r.start.Before(restored) {
					slowest = max(slowest, r.end.Sub(r.start))
				}
			}
			for status, n := range statuses {
				if status != "200 OK" && status != "503 Service Unavailable" {
					t.Errorf("%d answers %q: the clients must get answers or clear 503s", n, status)
				}
			}
			if frozen && slowest > frozenAnswerWithin {
				t.Errorf("a request during the freeze took %v, want an answer or a 503 within %v", slowest, frozenAnswerWithin)
			}
			booksFrom := time.Now()
			b := checkBooks(t, p)
			if b.CompletionTokens != delivered {
				t.Errorf("%d completion tokens billed, %d delivered to the clients: every delivered token must be billed once",
					b.CompletionTokens, delivered)
			}
			switch which {
			case "redis":
				which = "redis (back empty)"
			case "postgres-frozen":
				kept, late := checkKept(t, p, reqs, began, restored)
				which = fmt.Sprintf("postgres frozen (the %d answers in flight at the freeze had their settles kept in the settle log at most %v after the answer; the slowest request during the freeze had its answer in %v)",
					kept, late.Round(time.Millisecond), slowest.Round(time.Millisecond))
			}
			figure(t, "%s away for %v under 8 closed-loop clients (a second of load before and after): %d answered, %d refused with 503, nothing else; served again %v after it came back; books closed %v later: %d settled, %d cancelled, none reserved, balances equal credits less settled costs, %d completion tokens delivered = billed",
				which, outage, statuses["200 OK"], statuses["503 Service Unavailable"], recovery.Round(time.Millisecond),
				time.Since(booksFrom).Round(time.Millisecond), b.Settled, b.Cancelled, delivered)
		})
	}
}

// watchKept waits until thaw while PostgreSQL is frozen, noting for each
// request answered 200 since began how long after its answer its settle
// appeared in the settle log. Redis is up: the log is read as the
// gateway's replay would.
func watchKept(p *platformtest.Platform, mu *sync.Mutex, reqs *[]*outageRequest, began, thaw time.Time) {
	log := settlelog.New(p.Redis.Client(), p.Redis.Prefix, nil)
	for time.Now().Before(thaw) {
		mu.Lock()
		var watch []*outageRequest
		for _, r := range *reqs {
			if r.status == "200 OK" && r.end.After(began) && r.keptAfter == 0 {
				watch = append(watch, r)
			}
		}
		mu.Unlock()
		for _, r := range watch {
			if _, ok, err := log.Completion(context.Background(), r.id); err == nil && ok {
				mu.Lock()
				r.keptAfter = max(time.Since(r.end), time.Nanosecond)
				mu.Unlock()
			}
		}
		time.Sleep(50 * time.Millisecond) // the poll's period while the freeze lasts: its length is the scenario's input
	}
}

// checkKept fails the test unless every request answered 200 while
// PostgreSQL was frozen, early enough for its settle's bound to pass
// before the thaw, had its settle kept in the settle log within
// keptWithin, or was settled before the freeze took hold (its settle
// stamped before it began). It returns how many were kept, and the
// longest time one took.
func checkKept(t *testing.T, p *platformtest.Platform, reqs []*outageRequest, began, thaw time.Time) (int, time.Duration) {
	t.Helper()
	kept := 0
	var slowest time.Duration
	for _, r := range reqs {
		if r.status != "200 OK" || !r.end.After(began) || r.end.After(thaw.Add(-keptWithin)) {
			continue
		}
		if r.keptAfter > 0 && r.keptAfter <= keptWithin {
			kept++
			slowest = max(slowest, r.keptAfter)
			continue
		}
		var settledAt time.Time
		err := p.DB.QueryRowContext(context.Background(),
			"SELECT settled_at FROM usage_ledger WHERE request_id = $1", r.id).Scan(&settledAt)
		if err == nil && settledAt.Before(began) {
			continue // settled before the freeze took hold
		}
		t.Errorf("request %s answered %v into the freeze: its settle was not kept within %v (kept after %v; settled at %v, %v)",
			r.id, r.end.Sub(began).Round(time.Millisecond), keptWithin, r.keptAfter, settledAt, err)
	}
	return kept, slowest
}
