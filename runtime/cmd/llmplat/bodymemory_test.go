package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/hostilebody"
	"github.com/llmplat/llmplat/runtime/loadgen"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// The hostile-input report's load: 50 bodies of 8 MiB at once, of each
// shape, against one gateway.
const (
	largeBodies    = 50
	largeBodyBytes = gateway.MaxBodyBytes
	// maxGatewayRSS is what the gateway's resident memory must stay
	// under meanwhile: the report's goal, a quarter of the reference
	// Deployment's limit. BenchmarkLargeBodies records the figure.
	maxGatewayRSS = 512 << 20
)

// buildBinary builds the llmplat binary as it ships (no race detector:
// its memory is the figure) into a folder of the test's.
func buildBinary(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "llmplat")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("build llmplat: %v\n%s", err, out)
	}
	return bin
}

// gatewayProcess is `llmplat gateway` running as a process of its own.
type gatewayProcess struct {
	base string
	pid  int
}

// startGatewayProcess runs `llmplat gateway` from bin on real PostgreSQL
// and Redis, dispatching llama-8b to engineURL, until the test ends.
func startGatewayProcess(tb testing.TB, bin, engineURL, adminToken string) gatewayProcess {
	tb.Helper()
	rds := testenv.Redis(tb)
	cmd := exec.Command(bin, "gateway", "-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0",
		"-database-url", testenv.Postgres(tb), "-redis-url", rds.URL, "-redis-prefix", rds.Prefix,
		"-engine", "llama-8b="+engineURL+"@64")
	cmd.Env = append(os.Environ(), "LLMPLAT_ADMIN_TOKEN="+adminToken)
	// Its log (a line per request) is shown only when the test fails.
	logs := &testenv.Buffer{}
	cmd.Stderr = logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if tb.Failed() {
			tb.Logf("llmplat gateway's log:\n%s", logs.String())
		}
	})
	lines := bufio.NewScanner(out)
	serving := make(chan string, 1)
	go func() {
		for lines.Scan() {
			if _, rest, ok := strings.Cut(lines.Text(), "serving "); ok {
				base, _, _ := strings.Cut(rest, " ")
				serving <- base
			}
		}
	}()
	select {
	case base := <-serving:
		return gatewayProcess{base: base, pid: cmd.Process.Pid}
	case <-time.After(commandWait):
		tb.Fatalf("llmplat gateway printed no address in %v", commandWait)
		return gatewayProcess{}
	}
}

// peakRSS is the process's peak resident memory since it started or
// since resetPeak.
func (g gatewayProcess) peakRSS(tb testing.TB) int64 {
	tb.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatal("no VmHWM in the process's status")
	return 0
}

// resetPeak starts the process's peak resident memory anew (Linux's
// clear_refs, value 5).
func (g gatewayProcess) resetPeak(tb testing.TB) {
	tb.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", g.pid), []byte("5"), 0); err != nil {
		tb.Fatal(err)
	}
}

// largeBodyPlatform is a gateway process with an engine, a key without
// limits for the large bodies, one with the report's limits (rpm 1,
// max_streams 1), and another team's key for small requests.
type largeBodyPlatform struct {
	gw                        gatewayProcess
	attacker, limited, victim string
}

func startLargeBodyPlatform(tb testing.TB) largeBodyPlatform {
	tb.Helper()
	_, eng := startEngine(tb)
	const adminToken = "llpadm_0123456789abcdefghijABCDEFGHIJ0123456789abc"
	gw := startGatewayProcess(tb, buildBinary(tb), eng.URL, adminToken)
	ctx := context.Background()
	cl, err := adminclient.NewClient(gw.base, adminToken, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if _, _, err := cl.PutModel(ctx, "llama-8b", adminwire.ModelSpec{ServedName: "llama-8b", PromptPriceMicroPerMTok: 100_000,
		CompletionPriceMicroPerMTok: 500_000, MaxContextTokens: 8192, MaxOutputTokens: 4096}); err != nil {
		tb.Fatal(err)
	}
	keys := map[string]string{}
	for _, name := range []string{"attacker", "limited", "victim"} {
		team, _, err := cl.CreateTeam(ctx, name)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := cl.AddCredit(ctx, adminwire.CreditRequest{TeamID: team.ID, AmountMicrocredits: 100_000_000, IdempotencyKey: name}); err != nil {
			tb.Fatal(err)
		}
		req := adminwire.CreateKeyRequest{TeamID: team.ID, Name: name}
		if name == "limited" {
			req.RPM, req.MaxStreams = 1, 1
		}
		key, err := cl.CreateKey(ctx, req, "")
		if err != nil {
			tb.Fatal(err)
		}
		keys[name] = key.Secret
	}
	return largeBodyPlatform{gw: gw, attacker: keys["attacker"], limited: keys["limited"], victim: keys["victim"]}
}

// largeBodyRun is what one burst of large bodies did.
type largeBodyRun struct {
	peakRSS  int64
	statuses map[int]int // HTTP status → answers; 0: the request failed
	victim   []time.Duration
	victimOK bool // every small request of the other team was served
}

// run sends largeBodies bodies of the shape at once, while the victim's
// small requests go one after another until the burst has ended and at
// least minVictim have gone.
func (p largeBodyPlatform) run(tb testing.TB, key, body string) largeBodyRun {
	tb.Helper()
	const minVictim = 20
	p.gw.resetPeak(tb)
	out := largeBodyRun{statuses: map[int]int{}, victimOK: true}
	var mu sync.Mutex
	burst := make(chan struct{})
	var wg sync.WaitGroup
	for range largeBodies {
		wg.Go(func() {
			status := post(p.gw.base, key, body)
			mu.Lock()
			out.statuses[status]++
			mu.Unlock()
		})
	}
	go func() { wg.Wait(); close(burst) }()
	small := `{"model":"llama-8b","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
	for ended := false; !ended || len(out.victim) < minVictim; {
		select {
		case <-burst:
			ended = true
		default:
		}
		start := time.Now()
		status := post(p.gw.base, p.victim, small)
		out.victim = append(out.victim, time.Since(start))
		out.victimOK = out.victimOK && status == http.StatusOK
	}
	out.peakRSS = p.gw.peakRSS(tb)
	return out
}

// post sends body and returns the answer's status, 0 when the request
// failed.
func post(base, key, body string) int {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	var sink bytes.Buffer
	_, _ = sink.ReadFrom(resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestLargeBodiesKeepMemoryBounded: 50 bodies of 8 MiB at once, of each
// shape of the hostile-input report, on a key without limits (so every
// body is read), keep `llmplat gateway` under maxGatewayRSS; every answer
// is a clear refusal (400, or 503 with Retry-After when the body budget is
// full), and another team's small requests are all served meanwhile.
func TestLargeBodiesKeepMemoryBounded(t *testing.T) {
	p := startLargeBodyPlatform(t)
	for _, sh := range hostilebody.Shapes {
		t.Run(sh.Name, func(t *testing.T) {
			r := p.run(t, p.attacker, sh.Build(largeBodyBytes))
			t.Logf("peak RSS %d MiB; answers %v; the other team's %d requests, p99 %v",
				r.peakRSS>>20, r.statuses, len(r.victim), loadgen.Quantile(r.victim, 0.99))
			if r.peakRSS > maxGatewayRSS {
				t.Errorf("peak RSS %d MiB, want under %d MiB", r.peakRSS>>20, maxGatewayRSS>>20)
			}
			for status, n := range r.statuses {
				if status != http.StatusBadRequest && status != http.StatusServiceUnavailable {
					t.Errorf("%d answers %d, want 400 or 503 (0: no answer, the connection failed)", n, status)
				}
			}
			if !r.victimOK {
				t.Errorf("another team's small requests were not all served")
			}
		})
	}
	// The report's own key, over its limits: refused before its bodies
	// are read, but for its one request of the minute.
	t.Run("a key over its limits", func(t *testing.T) {
		r := p.run(t, p.limited, hostilebody.Shapes[0].Build(largeBodyBytes))
		t.Logf("peak RSS %d MiB; answers %v", r.peakRSS>>20, r.statuses)
		if r.statuses[http.StatusTooManyRequests] < largeBodies-1 || r.statuses[http.StatusTooManyRequests]+r.statuses[http.StatusBadRequest] != largeBodies {
			t.Errorf("answers %v, want 429 for all but the minute's one request (400)", r.statuses)
		}
		if r.peakRSS > maxGatewayRSS {
			t.Errorf("peak RSS %d MiB, want under %d MiB", r.peakRSS>>20, maxGatewayRSS>>20)
		}
	})
	http.DefaultClient.CloseIdleConnections()
}

// BenchmarkLargeBodies reports, for each shape of the hostile-input
// report, the gateway's peak resident memory under 50 concurrent 8 MiB
// bodies and the p99 latency of another team's small requests meanwhile
// (docs/benchmarks.md).
func BenchmarkLargeBodies(b *testing.B) {
	p := startLargeBodyPlatform(b)
	for _, sh := range hostilebody.Shapes {
		body := sh.Build(largeBodyBytes)
		b.Run(strings.ReplaceAll(sh.Name, " ", "_"), func(b *testing.B) {
			var r largeBodyRun
			for b.Loop() {
				r = p.run(b, p.attacker, body)
			}
			b.ReportMetric(float64(r.peakRSS)/(1<<20), "peak-rss-MiB")
			b.ReportMetric(float64(loadgen.Quantile(r.victim, 0.99))/float64(time.Millisecond), "other-team-p99-ms")
			b.ReportMetric(float64(r.statuses[http.StatusServiceUnavailable]), "busy-503s")
			b.ReportMetric(0, "ns/op")
		})
	}
	http.DefaultClient.CloseIdleConnections()
}
