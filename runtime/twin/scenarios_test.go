package twin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/clusterwatch"
	"github.com/llmplat/llmplat/runtime/gateway"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// reportEnv names the folder make twin writes the scenarios' report
// into (docs/): twin.md and its pictures. Unset, the scenarios run
// reduced (make test) and write nothing.
const reportEnv = "LLMPLAT_TWIN_REPORT"

// Time scales: make test's reduced twin runs 30 times faster than real
// time (the 70B's 1,116 s cold start in 37 s; KEDA's 15 s polling at its
// floor of 1 s), make twin's 10 times.
const (
	reducedScale = 30
	fullScale    = 10
)

// twinRun is one twin with the platform on it, and what its scenarios
// use.
type twinRun struct {
	c      *Cluster
	p      *Platform
	eng    *Engines
	prom   *Prometheus
	tl     *Timeline
	admin  *adminclient.Client
	key    string
	models map[string]string // model → served name
	// pictures are the scenarios' pictures, by file name in the
	// report's folder twin/.
	pictures map[string][]byte
}

// startTwin boots a twin with the rendered reference platform on it, the
// models declared, a team with credit and its key, and the recording on.
func startTwin(t *testing.T, scale float64) *twinRun {
	t.Helper()
	c := StartControlPlane(t, Options{Scale: scale})
	if c == nil {
		return nil
	}
	bin := BuildLLMPlat(t)
	prom := c.StartPrometheus(t)
	c.StartKEDA(t)
	c.StartKWOK(t)
	c.StartKarpenter(t, capacity.Instances())
	eng := c.StartEngines(t, EngineOptions{Binary: bin})
	if t.Failed() || t.Skipped() {
		return nil
	}
	rendered := renderExample(t)
	applied, err := Substitute(Env{Scaler: c, PrometheusURL: prom.URL}, rendered)
	if err != nil {
		t.Fatal(err)
	}
	c.Apply(t, applied)
	p := c.StartPlatform(t, bin, rendered)
	r := &twinRun{c: c, p: p, eng: eng, prom: prom, models: map[string]string{}, pictures: map[string][]byte{}}
	r.feedPrometheus(t)
	r.declare(t, applied)
	r.tl = c.Record(t, p, max(c.Dur(5*time.Second), 200*time.Millisecond))
	return r
}

// feedPrometheus keeps the Prometheus targets the PodMonitor and
// ServiceMonitor would give: every engine pod's metrics and every
// orchestrator's, until the test ends.
func (r *twinRun) feedPrometheus(t *testing.T) {
	var orchs []Target
	for _, o := range r.p.Orchestrators {
		orchs = append(orchs, Target{Addr: o.Addr("metrics"), Labels: map[string]string{"pod": o.Name}})
	}
	if err := r.prom.SetTargets("orchestrators", orchs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := ""
		for {
			var targets []Target
			var names []string
			for _, s := range r.eng.Sims("") {
				targets = append(targets, Target{Addr: s.Addr, Labels: map[string]string{"pod": s.Pod}})
				names = append(names, s.Addr)
			}
			if key := strings.Join(names, ","); key != last {
				if err := r.prom.SetTargets("engines", targets); err == nil {
					last = key
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// declare declares every rendered model (its served name and limits from
// its Service's model spec), a team with credit and an API key.
func (r *twinRun) declare(t *testing.T, applied []*unstructured.Unstructured) {
	t.Helper()
	ctx := t.Context()
	admin, err := adminclient.NewClient(r.p.URL, r.p.AdminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.admin = admin
	for _, o := range applied {
		spec, ok := o.GetAnnotations()[clusterwatch.ModelSpecAnnotation]
		if o.GetKind() != "Service" || !ok {
			continue
		}
		m, _, err := clusterwatch.ParseModelSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := admin.PutModel(ctx, m.Name, adminwire.ModelSpec{ServedName: m.ServedName,
			PromptPriceMicroPerMTok: 100_000, CompletionPriceMicroPerMTok: 400_000,
			MaxContextTokens: m.MaxModelLen, MaxOutputTokens: 1024}); err != nil {
			t.Fatal(err)
		}
		r.models[m.Name] = m.ServedName
	}
	team, _, err := admin.CreateTeam(ctx, "twin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AddCredit(ctx, adminwire.CreditRequest{TeamID: team.ID, AmountMicrocredits: 1_000_000_000_000, IdempotencyKey: "twin"}); err != nil {
		t.Fatal(err)
	}
	key, err := admin.CreateKey(ctx, adminwire.CreateKeyRequest{TeamID: team.ID, Name: "twin"}, "")
	if err != nil {
		t.Fatal(err)
	}
	r.key = key.Secret
}

// waitSlack is added to every scenario's wait: what the twin runs at
// full speed (Karpenter's own loops, process starts, a busy CI machine's
// delays) does not shrink with the time scale.
const waitSlack = 3 * time.Minute

// waitFor waits up to within (real-world, then scaled) plus waitSlack for
// cond on the latest sample.
func (r *twinRun) waitFor(t *testing.T, within time.Duration, what string, cond func(Sample) error) {
	t.Helper()
	testenv.EventuallyNil(t, r.c.Dur(within)+waitSlack, what, func() error { return cond(r.tl.Last()) })
	r.tl.Mark(what)
	t.Logf("%s: GPU nodes %v", what, r.tl.Last().Shapes)
}

// waitStep waits for cond as one step of a scenario, marks it on the
// timeline and returns when it held.
func (r *twinRun) waitStep(t *testing.T, what string, cond func() error) time.Duration {
	t.Helper()
	testenv.EventuallyNil(t, r.c.Dur(30*time.Minute)+waitSlack, what, cond)
	r.tl.Mark(what)
	return r.tl.Now()
}

// floors are the reference platform's warm replicas: the 8B's on-demand
// floor, the 32B's one, the 70B at zero (its office-hours replica is the
// cron trigger the twin drops).
var floors = map[string]int{"llama-8b": 2, "qwen-32b": 1, "llama-70b": 0}

// atFloors is nil when every model runs its floor, ready, and nothing
// more.
func atFloors(s Sample) error {
	for m, n := range floors {
		if s.Ready[m] != n || s.Pods[m] != n {
			return fmt.Errorf("%s: %d ready of %d pods, want %d", m, s.Ready[m], s.Pods[m], n)
		}
	}
	return nil
}

// TestTwin runs the twin's scenarios: make test runs the reduced set (the
// 70B woken from zero, the load gone, an AMI drift), make twin all of
// them (with the reference load first and the runaway demand last) at a
// milder time scale, and writes docs/twin.md.
func TestTwin(t *testing.T) {
	report := os.Getenv(reportEnv)
	scale := float64(reducedScale)
	if report != "" {
		scale = fullScale
	}
	r := startTwin(t, scale)
	if r == nil {
		return
	}
	var sections []string
	r.waitFor(t, 20*time.Minute, "the warm floors ready", atFloors)
	if report != "" {
		sections = append(sections, r.scenarioRamp(t))
	}
	wakeBegan := r.tl.Now()
	sections = append(sections, r.scenarioWake(t))
	sections = append(sections, r.scenarioLoadStops(t))
	rest := r.tl.Between(wakeBegan, r.tl.Now())
	picture := rest.SVG("The 70B woken from zero, then the load gone", []Panel{
		{"the 70B", []Series{PodsOf("llama-70b"), ReadyOf("llama-70b"), PendingOf("llama-70b")}},
		{"the other models", []Series{ReadyOf("llama-8b"), ReadyOf("qwen-32b")}},
		{"GPU nodes", []Series{NodesOf("gpu-l40s"), NodesOf("gpu-l40s-spot"), EmptyNodes()}},
	})
	sections = append(sections, "![the 70B woken from zero, then the load gone](twin/wake-and-rest.svg)\n\n"+rest.EventTable())
	sections = append(sections, r.scenarioDrift(t))
	if report != "" {
		sections = append(sections, r.scenarioSpot(t))
		sections = append(sections, r.scenarioRollout(t))
		sections = append(sections, r.scenarioRunaway(t))
	}
	t.Logf("timeline (scale %g):\n%s", r.c.Scale, r.tl.EventTable())
	t.Logf("GPU nodes at the end: %v", r.tl.Last().Shapes)
	if report != "" {
		r.pictures["wake-and-rest.svg"] = picture
		writeReport(t, report, sections, r.pictures)
	}
}

// drawn draws the timeline from began to now as the picture file (under
// docs/twin) with its panels, and returns the section's picture link and
// event table.
func (r *twinRun) drawn(file, title string, began time.Duration, panels []Panel) string {
	window := r.tl.Between(began, r.tl.Now())
	r.pictures[file] = window.SVG(title, panels)
	return fmt.Sprintf("\n![%s](twin/%s)\n\n%s", title, file, window.EventTable())
}

// scenarioWake: the 70B at zero. Its first caller is an application on
// an SDK's defaults (its 10-minute timeout and two retries): the gateway
// holds it for the wake, so it is served once the replica KEDA and
// Karpenter bring up has loaded, rather than failing after two quick
// retries of a 503. The pending gauge is what wakes it.
func (r *twinRun) scenarioWake(t *testing.T) string {
	t.Helper()
	const big = "llama-70b"
	ctx := t.Context()
	sdk := r.c.NewSDK(r.p.URL, r.key)
	began := r.tl.Now()
	r.tl.Mark("first caller of the 70B (an SDK on its defaults)")
	first := sdk.StreamChat(ctx, r.tl, big, "Wake up.", 16)
	if first.FirstToken == 0 {
		t.Fatalf("the first caller of the 70B, on an SDK's defaults, was never served: %+v", first)
	}
	load := r.c.Dur(renderedLoad(t, big))
	wake := first.FirstToken - first.Sent
	if wake > 2*load+r.c.Dur(2*time.Minute) {
		t.Errorf("the 70B served its first token %v after its first caller: more than twice its expected load (%v) and 2 min", wake, load)
	}
	var sawPending bool
	for _, s := range r.tl.Between(began, r.tl.Now()).Samples() {
		sawPending = sawPending || s.Pending[big] > 0
	}
	if !sawPending {
		t.Error("the pending gauge never rose for the 70B while it woke")
	}
	return fmt.Sprintf("### 2. The 70B at zero\n\nThe first caller, on an SDK's defaults (a 10-minute timeout, 2 retries): "+
		"held by the gateway for the wake (%s per attempt), first token %s after its first request, in %d attempt(s) "+
		"(expected load %s).\n", r.tl.both(r.c.Dur(gateway.DefaultWakeHold)), r.tl.both(wake), first.Attempts, r.tl.both(load))
}

// scenarioLoadStops: with no more load, every model returns to its floor
// after KEDA's cooldown and the HPA's window, the emptied GPU nodes go
// after consolidateAfter, and no stream was cut.
func (r *twinRun) scenarioLoadStops(t *testing.T) string {
	t.Helper()
	r.tl.Mark("load stops")
	busy := r.tl.Last().Shapes
	r.waitFor(t, 40*time.Minute, "every model back at its floor", atFloors)
	atFloor := r.tl.Last().Shapes
	r.waitFor(t, 20*time.Minute, "no GPU node left empty", func(s Sample) error {
		if s.Empty > 0 {
			return fmt.Errorf("%d empty GPU nodes", s.Empty)
		}
		return nil
	})
	if cut := r.eng.StreamsCut(); cut != 0 {
		t.Errorf("%d streams cut while the load went", cut)
	}
	return fmt.Sprintf("### 3. Load stops\n\nEvery model back at its floor and no GPU node left empty; %d streams cut.\n\n"+
		"GPU nodes (name: instance type, pool, engine pods) when the load stopped: %s; back at the floors: %s; at the end: %s.\n",
		r.eng.StreamsCut(), strings.Join(busy, "; "), strings.Join(atFloor, "; "), strings.Join(r.tl.Last().Shapes, "; "))
}

func errSuffix(err string) string {
	if err == "" {
		return ""
	}
	return ": " + err
}

// expectedLoad is a model's real-world cold start as rendered (its
// Service's expected-load, before the twin's scale).
func renderedLoad(t *testing.T, model string) time.Duration {
	t.Helper()
	for _, o := range renderExample(t) {
		if spec, ok := o.GetAnnotations()[clusterwatch.ModelSpecAnnotation]; ok && o.GetKind() == "Service" {
			m, load, err := clusterwatch.ParseModelSpec(spec)
			if err == nil && m.Name == model {
				return load
			}
		}
	}
	t.Fatalf("no rendered Service for %s", model)
	return 0
}

// writeReport rewrites the report section of docs/twin.md in dir with
// the scenarios' sections, and writes their pictures into dir/twin.
func writeReport(t *testing.T, dir string, sections []string, pictures map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "twin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range pictures {
		if err := os.WriteFile(filepath.Join(dir, "twin", name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := rewriteSection(filepath.Join(dir, "twin.md"), reportMarker, strings.Join(sections, "\n")); err != nil {
		t.Fatal(err)
	}
}
