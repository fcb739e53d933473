package chaos_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/ledger"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/quota"
	"github.com/llmplat/llmplat/runtime/testenv"
)

func TestMain(m *testing.M) {
	if code, ok := platformtest.Child(); ok {
		os.Exit(code)
	}
	testenv.MainWithLeakCheck(m)
}

// sizeEnv set to "full" runs every scenario at the reference workload's size (make
// chaos); otherwise each runs reduced, small enough for make test.
const sizeEnv = "LLMPLAT_CHAOS_SIZE"

// size is reduced, or full under LLMPLAT_CHAOS_SIZE=full.
func size(t *testing.T, reduced, full int) int {
	switch v := os.Getenv(sizeEnv); v {
	case "", "reduced":
		return reduced
	case "full":
		return full
	default:
		t.Fatalf("%s=%q: want full or reduced", sizeEnv, v)
		return 0
	}
}

// figure prints a scenario's measured result in the form make chaos and
// docs/reliability.md show.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("chaos: %s: %s", t.Name(), fmt.Sprintf(format, args...))
}

// model is the one model the scenarios serve.
const model = "llama-8b"

// start runs a platform with the model registered. Hundreds of requests
// at once on a busy machine must test the scenario, not the gateway's
// budget for one Redis call, whose honest answer when exceeded is a 503:
// the budget is generous.
func start(t *testing.T) *platformtest.Platform {
	t.Helper()
	p := platformtest.Start(t, platformtest.Options{StreamIdleTimeout: time.Hour, RedisTimeout: time.Minute})
	p.Model(model, model)
	return p
}

// booksWait bounds checkBooks' wait: the settles a database outage held
// back come in at the settle log's next replay (every 10 s), with room
// for a loaded machine.
const booksWait = 2 * time.Minute

// checkBooks fails the test unless the ledger's invariant holds and no
// reservation is left open, waiting for the settles the gateway runs
// after each answer. It returns the books.
func checkBooks(t *testing.T, p *platformtest.Platform) ledger.Books {
	t.Helper()
	var (
		b   ledger.Books
		err error
	)
	// The settles a database outage held back come in at the settle log's
	// next replay.
	testenv.EventuallyNil(t, booksWait, "the books to balance with nothing reserved", func() error {
		b, err = p.CheckBooks(context.Background())
		if err == nil && b.Reserved != 0 {
			err = fmt.Errorf("books %+v", b)
		}
		return err
	})
	return b
}

// streamBody is a streamed request for maxTokens with the running usage.
func streamBody(i, maxTokens int) string {
	return fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":%d,"stream_options":{"include_usage":true,"continuous_usage_stats":true},"messages":[{"role":"user","content":"chaos %d"}]}`,
		model, maxTokens, i)
}

// post sends one chat completion with key.
func post(ctx context.Context, client *http.Client, url, key, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	return client.Do(req)
}

// TestEngineKilledMidStream: the engine dies while every stream is
// mid-answer. Each client gets an error event and [DONE] — none hangs —
// and the ledger settles what each stream produced, never more than the
// engine generated.
func TestEngineKilledMidStream(t *testing.T) {
	n := size(t, 20, 200)
	p := start(t)
	// Answers run to max_tokens (a mean far above it): 400 tokens, ten
	// seconds in real time, so every stream is still mid-answer when the
	// engine dies.
	node := p.StartNode("node-1", model, enginesim.Config{ServedModelName: model, Seed: 1, TimeScale: 1,
		MeanAnswerTokens: 1_000_000}, 2*n)
	key, client := tenant(t, p, adminwire.CreateKeyRequest{})

	var (
		wg              sync.WaitGroup
		started         sync.WaitGroup
		errEvents, hung atomic.Int64
		relayed         atomic.Int64
		slowest         atomic.Int64 // ns from the kill to a stream's end
		killedAt        atomic.Int64
		firstErr        atomic.Value
		ctx, cancel     = context.WithTimeout(context.Background(), 2*time.Minute)
		startedOnce     = make([]sync.Once, n)
	)
	defer cancel()
	started.Add(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer startedOnce[i].Do(started.Done)
			resp, err := post(ctx, client, p.URL, key, streamBody(i, 400))
			if err != nil {
				firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				firstErr.CompareAndSwap(nil, fmt.Sprintf("%s %s", resp.Status, b))
				return
			}
			r := openai.NewSSEReader(resp.Body)
			for {
				data, err := r.Next()
				if err != nil {
					hung.Add(1) // the body ended without [DONE]
					return
				}
				switch {
				case openai.IsDone(data):
					if k := killedAt.Load(); k != 0 {
						slowest.Store(max(slowest.Load(), time.Now().UnixNano()-k))
					}
					return
				case openai.StreamError(data) != nil:
					errEvents.Add(1)
				case bytes.Contains(data, []byte(`"content":"`)) && !bytes.Contains(data, []byte(`"content":""`)):
					relayed.Add(1)
					startedOnce[i].Do(started.Done)
				}
			}
		}()
	}
	started.Wait()
	killedAt.Store(time.Now().UnixNano())
	node.Sim.SetFaults(enginesim.Faults{Dead: true})
	wg.Wait()
	if f := firstErr.Load(); f != nil {
		t.Fatalf("a request failed before streaming: %v", f)
	}
	if errEvents.Load() != int64(n) || hung.Load() != 0 {
		t.Errorf("%d of %d streams got an error event, %d ended without [DONE]", errEvents.Load(), n, hung.Load())
	}
	b := checkBooks(t, p)
	generated := node.Sim.Stats().GenerationTokens
	if b.Settled != n || b.CompletionTokens > generated || b.CompletionTokens < relayed.Load() {
		t.Errorf("books %+v: want %d rows settled with at least the %d content chunks relayed and at most the %d tokens generated",
			b, n, relayed.Load(), generated)
	}
	figure(t, "%d streams cut mid-answer: %d error events, %d hung, the last ended %v after the kill; settled %d rows (%d cancelled), %d completion tokens of %d generated (%d content chunks relayed)",
		n, errEvents.Load(), hung.Load(), time.Duration(slowest.Load()).Round(time.Millisecond), b.Settled, b.Cancelled, b.CompletionTokens, generated, relayed.Load())
}

// TestMaxStreamsHolds: one key with max_streams opens many streams at
// once; exactly max_streams are served at a time and the rest are refused
// with 429, and every slot is given back afterwards.
func TestMaxStreamsHolds(t *testing.T) {
	n := size(t, 100, 500)
	limit := n / 5
	p := start(t)
	// The engine stalls every stream after its first token, so the
	// admitted streams stay open until their clients leave.
	p.StartNode("node-1", model, enginesim.Config{ServedModelName: model, Seed: 1, TimeScale: 5,
		Faults: enginesim.Faults{StallAfterTokens: 1}}, 2*n)
	key, client := tenant(t, p, adminwire.CreateKeyRequest{MaxStreams: limit})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var (
		ok, refused, other atomic.Int64
		firstOther         atomic.Value
		wg                 sync.WaitGroup
		gate               = make(chan struct{})
		holding            = make(chan struct{}, n)
		release            = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			resp, err := post(ctx, client, p.URL, key, streamBody(i, 200))
			if err != nil {
				other.Add(1)
				firstOther.CompareAndSwap(nil, err.Error())
				return
			}
			defer platformtest.Discard(resp)
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
				holding <- struct{}{}
				<-release // hold the stream open until every request was answered
			case http.StatusTooManyRequests:
				refused.Add(1)
			default:
				other.Add(1)
				b, _ := io.ReadAll(resp.Body)
				firstOther.CompareAndSwap(nil, fmt.Sprintf("%s %s", resp.Status, b))
			}
		}()
	}
	close(gate)
	// Every request is answered (200 and held, or refused) before any
	// admitted stream ends.
	testenv.EventuallyNil(t, time.Minute, fmt.Sprintf("an answer to each of %d requests", n), func() error {
		if ok.Load()+refused.Load()+other.Load() < int64(n) {
			return fmt.Errorf("%d admitted, %d refused, %d other", ok.Load(), refused.Load(), other.Load())
		}
		return nil
	})
	held := slots(t, p)
	close(release)
	cancel() // the held streams end: their clients leave
	wg.Wait()
	if ok.Load() != int64(limit) || refused.Load() != int64(n-limit) || other.Load() != 0 || held != int64(limit) {
		t.Errorf("%d admitted, %d refused with 429, %d other (first: %v), %d slots held; want %d, %d, 0, %d",
			ok.Load(), refused.Load(), other.Load(), firstOther.Load(), held, limit, n-limit, limit)
	}
	testenv.EventuallyNil(t, 30*time.Second, "every stream slot released after the clients left", func() error {
		if got := slots(t, p); got != 0 {
			return fmt.Errorf("%d slots held", got)
		}
		return nil
	})
	b := checkBooks(t, p)
	figure(t, "%d streams opened at once on a key with max_streams %d: %d served, %d refused with 429, %d slots held at the peak, 0 after; books: %d settled, %d cancelled, none reserved",
		n, limit, ok.Load(), refused.Load(), held, b.Settled, b.Cancelled)
}

// slots counts the stream slots held in Redis across keys: the members
// whose deadline (their score, in Redis's milliseconds) has not passed. An
// expired member is no slot: the next admission of its key removes it, and
// until then it counts for nothing (a gateway's unused tickets end so).
func slots(t *testing.T, p *platformtest.Platform) int64 {
	t.Helper()
	ctx := context.Background()
	keys := quota.NewKeys(p.Redis.Prefix)
	now, err := p.Redis.Client().Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	live := "(" + strconv.FormatInt(now.UnixMilli(), 10)
	var total int64
	iter := p.Redis.Client().Scan(ctx, 0, keys.Streams("*"), 0).Iterator()
	for iter.Next(ctx) {
		n, err := p.Redis.Client().ZCount(ctx, iter.Val(), live, "+inf").Result()
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}

// poolSlack is the memory a burst may leave in the pools it grew.
const poolSlack = 16 << 20

// TestAbandonedStreams: clients open many streams and leave mid-answer,
// all at once. Goroutines, memory, stream slots and reservations all
// return to where they were. Each stream holds
// a descriptor in the client, the gateway, the node agent and the engine,
// and a process here may hold 20,000: the client, the agent and the engine
// run in child processes of their own, and this one holds the gateway and
// the orchestrator, whose goroutines and memory are measured.
func TestAbandonedStreams(t *testing.T) {
	n := size(t, 300, 10_000)
	p := start(t)
	// The engine stalls each stream after its first tokens: the streams
	// stay open without the engine's work growing with their number.
	engineURL := platformtest.StartNodeProcess(t, platformtest.NodeProcess{Model: model, MaxNumSeqs: 2 * n, StallAfterTokens: 2})
	platformtest.StartNodeProcess(t, platformtest.NodeProcess{Model: model, NodeID: "node-1", ServerURL: p.WSURL,
		Token: p.NodeToken("node-1"), EngineURL: engineURL, MaxNumSeqs: 2 * n})
	p.WaitNode("node-1")
	key, _ := tenant(t, p, adminwire.CreateKeyRequest{MaxStreams: 2 * n})
	baseLive, baseG := testenv.LiveBytes()

	held, leave := platformtest.StartClientProcess(t, platformtest.ClientProcess{
		Target: loadgen.Target{Name: "platform", URL: p.URL, Key: key, Model: model}, Streams: n, Prompt: "chaos"}, 10*time.Minute)
	if held.Opened != n {
		t.Fatalf("%d of %d streams opened; first error: %s", held.Opened, n, held.FirstError)
	}
	openLive, openG := testenv.LiveBytes()
	left := time.Now()
	leave() // every client leaves mid-answer: the client process ends
	var g int
	var live uint64
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		live, g = testenv.LiveBytes()
		// A few goroutines may stay: idle connections. Memory comes back
		// with the goroutines; what may stay is the pools the burst grew
		// (database and Redis connections, buffers: a few MiB whatever
		// the number of streams), and at most a tenth of what the streams
		// held.
		memoryBack := live <= baseLive || live-baseLive <= poolSlack+(openLive-baseLive)/10
		if g <= baseG+16 && memoryBack && slots(t, p) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 minutes after the clients left: %d goroutines (%d before), %d KiB live (%d before, %d with the streams open), %d slots held",
				g, baseG, live>>10, baseLive>>10, openLive>>10, slots(t, p))
		}
	}
	back := time.Since(left)
	b := checkBooks(t, p)
	if b.Settled+b.Cancelled != n {
		t.Errorf("books %+v: want all %d rows ended", b, n)
	}
	figure(t, "%d streams opened in %.1f s (gateway and orchestrator: %d goroutines, %d KiB live) and abandoned at once: back to %d goroutines (%d before) and %d KiB live (%d before) in %v; 0 slots held, %d rows settled and %d cancelled, none reserved",
		n, held.Seconds, openG, openLive>>10, g, baseG, live>>10, baseLive>>10, back.Round(time.Millisecond), b.Settled, b.Cancelled)
}

// requestsSeen is how many requests an engine took in.
func requestsSeen(sim *enginesim.Sim) int64 {
	st := sim.Stats()
	return st.Finished + st.Aborted + int64(st.Running) + int64(st.Waiting)
}

// TestSocketCut: an on-prem node's socket is cut while streams run on it
// and stays down a while. Its streams end with an error event, the
// requests that come meanwhile are all served by the other node and none
// reaches the cut one, and once the link is back the node's agent
// reconnects by itself (its backoff) and takes work again.
func TestSocketCut(t *testing.T) {
	n := size(t, 20, 200)
	p := start(t)
	link := p.NodeLink()
	// Answers run to max_tokens: 400 tokens, about ten seconds.
	cut := p.StartNodeVia(link, "node-cut", model, enginesim.Config{ServedModelName: model, Seed: 1, TimeScale: 1,
		MeanAnswerTokens: 1_000_000}, 2*n)
	other := p.StartNode("node-other", model, enginesim.Config{ServedModelName: model, Seed: 2, TimeScale: 1,
		MeanAnswerTokens: 1_000_000}, 4*n)
	key, client := tenant(t, p, adminwire.CreateKeyRequest{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// n long streams, spread over both nodes by the router.
	h := loadgen.Hold(ctx, client, loadgen.Target{Name: "platform", URL: p.URL, Key: key, Model: model}, n, "chaos", 400)
	defer h.Close()
	if h.Opened != n {
		t.Fatalf("%d of %d streams opened; first error: %s", h.Opened, n, h.FirstError)
	}
	onCut := cut.Sim.Stats().Running
	if onCut == 0 {
		t.Fatalf("the router put none of %d streams on the node to cut", n)
	}
	epoch := p.WaitRegistered("node-cut", 0, time.Second)
	cutAt := time.Now()
	link.Cut()
	// The cut node's streams end: its engine is told to stop them once the
	// agent sees its socket go.
	testenv.EventuallyNil(t, 30*time.Second, "the cut node's engine to stop its streams", func() error {
		if running := cut.Sim.Stats().Running; running != 0 {
			return fmt.Errorf("%d streams running", running)
		}
		return nil
	})
	stopped := time.Since(cutAt)
	// While the link is down every request is served, by the other node.
	seenCut := requestsSeen(cut.Sim)
	var served int
	for i := range n {
		resp, err := post(ctx, client, p.URL, key, fmt.Sprintf(
			`{"model":%q,"max_tokens":3,"messages":[{"role":"user","content":"during the cut %d"}]}`, model, i))
		if err != nil {
			t.Fatal(err)
		}
		platformtest.Discard(resp)
		if resp.StatusCode == http.StatusOK {
			served++
		}
	}
	if served != n || requestsSeen(cut.Sim) != seenCut {
		t.Errorf("during the cut %d of %d requests served; the cut node took %d", served, n, requestsSeen(cut.Sim)-seenCut)
	}
	back := time.Now()
	link.Restore()
	// The agent comes back at its next attempt: its backoff's ceiling
	// doubled with every refused one, up to the required 60 s.
	p.WaitRegistered("node-cut", epoch, nodeproto.BackoffCap+30*time.Second)
	reconnected := time.Since(back)
	h.Close() // the streams still open on the other node end: their clients leave
	b := checkBooks(t, p)
	figure(t, "%d streams, %d on the cut node: its engine stopped them %v after the cut; %d of %d requests served during the cut, all by the other node (%d taken in all), none by the cut one; it re-registered %v after the link came back; books: %d settled, %d cancelled, none reserved",
		n, onCut, stopped.Round(time.Millisecond), served, n, requestsSeen(other.Sim), reconnected.Round(time.Millisecond), b.Settled, b.Cancelled)
}
