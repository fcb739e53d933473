package loadgen_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/nodeproto"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/registry"
)

// The seed's load: about 200 concurrent streams. An answer of 100 tokens at
// the engine's ~47 tokens/s at that batch lasts about 2.2 s, so 90 arrivals
// a second hold about 200 streams open.
const (
	overheadModel = "llama-8b"
	overheadRate  = 70
	// Long enough that each of the four targets, which share the
	// arrivals in turn, has about a thousand requests: a p99 is then the
	// tenth slowest, not the fifth.
	overheadDuration  = 60 * time.Second
	overheadMaxTokens = 100
	overheadPrompt    = "Summarise the history of the lighthouse at Alexandria in a few paragraphs."
)

// BenchmarkPlatformOverhead measures what the platform adds to a stream,
// against what a bare httputil.ReverseProxy adds, in one run on one engine:
// arrivals (open loop, Poisson, at the seed's load) go in turn to the
// engine directly, through the bare proxy, and through the full platform
// (gateway with authentication, quotas and the ledger's reservation on
// PostgreSQL and Redis; the orchestrator's routing in process, as in the
// local mode; the WebSocket hop; the node agent), and through the
// platform to the same engine as a cloud node (no WebSocket hop, no
// agent: how EKS traffic flows). What a path adds to time
// to first token is its quantile minus the direct path's; the reported
// ratios are the platform's addition over the proxy's (the mission's goal:
// at most 2 at p50 and p99) and the platform's p99 gap between tokens over
// the proxy's (goal: at most 1.2).
func BenchmarkPlatformOverhead(b *testing.B) {
	sim, engine := serveTimedSim(b, enginesim.Config{ServedModelName: overheadModel, Seed: 1})
	engineURL := engine.url
	proxyURL := serveProxy(b, engineURL)
	// The same engine is also a cloud node, which the orchestrator reaches
	// over HTTP as on EKS: the "cloud" target is the platform without the
	// WebSocket hop and the agent.
	platformURL, key := startPlatform(b, platformOpts{cloudClient: dispatch.NewEngineClient(),
		cloud: []orchestrator.CloudNode{{ID: "bench-cloud", URL: engineURL, Models: []registry.ModelSlot{{
			Name: cloudModel, ServedName: overheadModel, MaxNumSeqs: enginesim.DefaultMaxNumSeqs,
			MaxModelLen: enginesim.DefaultMaxModelLen, KVCapacityTokens: sim.Stats().KVBlocksTotal * 16}}}}},
		localNode(b, sim, engineURL, enginesim.DefaultMaxNumSeqs))
	waitRoutable(b, platformURL, key, cloudModel)
	targets := []loadgen.Target{
		{Name: "direct", URL: engineURL, Model: overheadModel},
		{Name: "proxy", URL: proxyURL, Model: overheadModel},
		{Name: "platform", URL: platformURL, Key: key, Model: overheadModel},
		{Name: "cloud", URL: platformURL, Key: key, Model: cloudModel},
	}
	client := loadgen.NewClient()
	defer client.CloseIdleConnections()
	// Warm every path: connections, the key cache, the orchestrator's view
	// of the node.
	warm(b, client, targets)

	b.ResetTimer()
	res, err := loadgen.Run(b.Context(), loadgen.Config{Targets: targets, Rate: overheadRate, Duration: overheadDuration,
		Prompt: overheadPrompt, MaxTokens: overheadMaxTokens, Seed: 42, Client: client})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	// A request's added time is its TTFT at the client less its TTFT at
	// the engine (from the request reaching the engine to the engine
	// writing the first token): the engine's own queueing and batching,
	// the same for every path, drop out of it request by request.
	type q struct{ add50, add99, itl99 time.Duration }
	got := map[string]q{}
	for _, r := range res {
		// No path may lose a request, the floor included.
		if r.Errors > 0 {
			b.Errorf("%s: %d of %d requests failed; first: %s", r.Name, r.Errors, r.Requests, r.FirstError)
		}
		added := engine.added(r.FirstToken)
		if len(added) < len(r.FirstToken)*99/100 {
			b.Errorf("%s: the engine timed %d of %d requests", r.Name, len(added), len(r.FirstToken))
		}
		got[r.Name] = q{loadgen.Quantile(added, 0.5), loadgen.Quantile(added, 0.99), loadgen.Quantile(r.ITL, 0.99)}
		b.Logf("%-8s %4d requests  TTFT p50 %7.2f ms p99 %7.2f ms  added p50 %5.2f ms p99 %5.2f ms  ITL p50 %5.2f ms p99 %5.2f ms",
			r.Name, r.Requests, ms(loadgen.Quantile(r.TTFT, 0.5)), ms(loadgen.Quantile(r.TTFT, 0.99)),
			ms(got[r.Name].add50), ms(got[r.Name].add99), ms(loadgen.Quantile(r.ITL, 0.5)), ms(got[r.Name].itl99))
	}
	st := sim.Stats()
	b.Logf("engine: %d finished, %d preempted, %d generated tokens", st.Finished, st.Preemptions, st.GenerationTokens)
	d, p, f := got["direct"], got["proxy"], got["platform"]
	b.ReportMetric(ms(p.add50-d.add50), "proxy-ttft-p50-added-ms")
	b.ReportMetric(ms(p.add99-d.add99), "proxy-ttft-p99-added-ms")
	b.ReportMetric(ms(f.add50-d.add50), "platform-ttft-p50-added-ms")
	b.ReportMetric(ms(f.add99-d.add99), "platform-ttft-p99-added-ms")
	b.ReportMetric(ratio(f.add50-d.add50, p.add50-d.add50), "ttft-p50-added-ratio")
	b.ReportMetric(ratio(f.add99-d.add99, p.add99-d.add99), "ttft-p99-added-ratio")
	b.ReportMetric(ratio(f.itl99, p.itl99), "itl-p99-ratio")
	c := got["cloud"]
	b.ReportMetric(ms(c.add50-d.add50), "cloud-ttft-p50-added-ms")
	b.ReportMetric(ms(c.add99-d.add99), "cloud-ttft-p99-added-ms")
	b.ReportMetric(ratio(c.add50-d.add50, p.add50-d.add50), "cloud-ttft-p50-added-ratio")
	b.ReportMetric(ratio(c.add99-d.add99, p.add99-d.add99), "cloud-ttft-p99-added-ratio")
	b.ReportMetric(ratio(c.itl99, p.itl99), "cloud-itl-p99-ratio")
	b.ReportMetric(0, "ns/op")
}

// timedEngine serves a simulator and records, for each loadgen request
// (found by the id at the start of its prompt), the time from the request
// reaching the engine to the engine writing its first content chunk.
type timedEngine struct {
	url string
	h   http.Handler
	mu  sync.Mutex
	ttf map[string]time.Duration
}

// serveTimedSim runs a simulator behind a timedEngine until the test ends.
func serveTimedSim(tb testing.TB, cfg enginesim.Config) (*enginesim.Sim, *timedEngine) {
	tb.Helper()
	sim, err := enginesim.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	e := &timedEngine{h: sim.Handler(), ttf: map[string]time.Duration{}}
	e.url = platformtest.Serve(tb, e)
	tb.Cleanup(func() { cancel(); <-done }) // runs before the server's cleanup: streams end first
	return sim, e
}

var requestID = regexp.MustCompile(`req-[a-z]+-[0-9]+`)

func (e *timedEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.URL.Path != "/v1/chat/completions" {
		e.h.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	id := string(requestID.Find(body))
	e.h.ServeHTTP(&firstTokenWriter{ResponseWriter: w, first: func() {
		if id != "" {
			e.mu.Lock()
			e.ttf[id] = time.Since(start)
			e.mu.Unlock()
		}
	}}, r)
}

// added returns, for each request the engine timed, the client's TTFT
// less the engine's.
func (e *timedEngine) added(clientTTFT map[string]time.Duration) []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]time.Duration, 0, len(clientTTFT))
	for id, c := range clientTTFT {
		if eng, ok := e.ttf[id]; ok {
			out = append(out, c-eng)
		}
	}
	return out
}

// firstTokenWriter calls first when the first content chunk is written.
type firstTokenWriter struct {
	http.ResponseWriter
	first func()
	seen  bool
}

func (w *firstTokenWriter) Write(p []byte) (int, error) {
	if !w.seen {
		if data, ok := bytes.CutPrefix(p, []byte("data: ")); ok && dispatch.ParseEvent(data).Tokens > 0 {
			w.seen = true
			w.first()
		}
	}
	return w.ResponseWriter.Write(p)
}

func (w *firstTokenWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *firstTokenWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ratio is a/b, or 0 when the proxy added nothing measurable.
func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// warm sends a few requests down every path and fails on any error.
func warm(b *testing.B, client *http.Client, targets []loadgen.Target) {
	b.Helper()
	res, err := loadgen.Run(b.Context(), loadgen.Config{Targets: targets, Rate: 20, Duration: 2 * time.Second,
		Prompt: overheadPrompt, MaxTokens: 10, Seed: 1, Client: client})
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range res {
		if r.Errors > 0 || r.Requests == 0 {
			b.Fatalf("warm-up %s: %d of %d failed: %s", r.Name, r.Errors, r.Requests, r.FirstError)
		}
	}
}

// serveProxy runs the floor: a bare reverse proxy that flushes every
// event as it comes, as any streaming proxy must.
func serveProxy(tb testing.TB, engineURL string) string {
	tb.Helper()
	u, err := url.Parse(engineURL)
	if err != nil {
		tb.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 0, 2048
	p := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }, FlushInterval: -1, Transport: tr,
		// A client that left (a closed loop's end) is no proxy error; any
		// other error is logged as the default handler does, and the
		// client sees it as a failed request.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				log.Printf("http: proxy error: %v", err)
			}
			w.WriteHeader(http.StatusBadGateway)
		}}
	return platformtest.Serve(tb, fullDuplex(p))
}

// fullDuplex lets h read the request's body after it began the response.
// Without it a ReverseProxy in front of an engine loses streams: the engine
// has the whole body and answers before the proxy's transport makes its
// last read of the inbound body (the one that finds its end); writing the
// answer's headers makes net/http's HTTP/1 server drain and close that
// body, the late read fails ("invalid Read on closed Body"), and the
// transport tears down the upstream connection under the stream it is
// relaying ("use of closed network connection"; the Go issue 40747). Any
// server that answers once it has the request, as vLLM does, triggers it.
func fullDuplex(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex() // HTTP/1 supports it; HTTP/2 is full duplex already
		h.ServeHTTP(w, r)
	})
}

// startPlatform runs the platform on real PostgreSQL and Redis: an
// orchestrator, the node startNode starts (its agent dials over a loopback
// WebSocket), and a gateway dispatching to the orchestrator in process. It returns the gateway's URL and an API key of a team with
// ample credit.
// platformOpts adjust startPlatform; the zero value is production's.
type platformOpts struct {
	// streamIdleTimeout is the gateway's (default its own).
	streamIdleTimeout time.Duration
	// durable runs the ledger on a PostgreSQL that syncs every commit to
	// disk, as production does (testenv.DurablePostgres).
	durable bool
	// teams is how many teams get a key (default 1); startPlatform
	// returns the first team's, and keys points at them all.
	teams int
	keys  *[]string
	// cloud are engines the orchestrator reaches over HTTP, as on EKS;
	// each of their models is registered with the platform. cloudClient
	// is the orchestrator's client for them (default its own).
	cloud       []orchestrator.CloudNode
	cloudClient *http.Client
}

// nodeStarter starts the node "bench-node": an agent that dials wsURL with
// token, beside an engine.
type nodeStarter func(wsURL, token string)

// localNode starts the node's agent in this process, beside sim at
// engineURL, declaring maxNumSeqs; it runs until the test ends.
func localNode(tb testing.TB, sim *enginesim.Sim, engineURL string, maxNumSeqs int) nodeStarter {
	return func(wsURL, token string) {
		st := sim.Stats()
		agent, err := nodeagent.New(nodeagent.Config{ServerURL: wsURL, NodeID: "bench-node", Token: nodeproto.Secret(token),
			EngineURL: engineURL, Logger: slog.New(slog.DiscardHandler),
			Models: []nodeproto.Model{{Name: overheadModel, ServedName: sim.ServedModelName(), MaxNumSeqs: maxNumSeqs,
				MaxModelLen: int(sim.MaxModelLen()), KVCapacityTokens: st.KVBlocksTotal * 16}}})
		if err != nil {
			tb.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- agent.Run(ctx) }()
		tb.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("agent: %v", err)
			}
		})
	}
}

func startPlatform(tb testing.TB, opts platformOpts, startNode nodeStarter) (string, string) {
	tb.Helper()
	p := platformtest.Start(tb, platformtest.Options{Durable: opts.durable, StreamIdleTimeout: opts.streamIdleTimeout,
		Cloud: opts.cloud, CloudClient: opts.cloudClient})
	startNode(p.WSURL, p.NodeToken("bench-node"))
	p.Model(overheadModel, overheadModel)
	for _, n := range opts.cloud {
		for _, m := range n.Models {
			p.Model(m.Name, m.ServedName)
		}
	}
	var keys []string
	for i := range max(1, opts.teams) {
		team := p.Team(fmt.Sprintf("bench-%d", i), 1_000_000_000_000)
		// Limits far above the load, so that every check runs and none refuses.
		keys = append(keys, p.Key(admin.CreateKeyRequest{TeamID: team, Name: "bench",
			RPM: 1_000_000, TokensPerDay: 1_000_000_000_000, MaxStreams: 10_000}))
	}
	if opts.keys != nil {
		*opts.keys = keys
	}
	// The orchestrator routes to the node once its snapshot shows it.
	p.WaitNode("bench-node")
	return p.URL, keys[0]
}
