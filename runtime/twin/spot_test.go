package twin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmplat/llmplat/runtime/clusterwatch"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/routing"
	"github.com/llmplat/llmplat/runtime/testenv"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// capacityTypeLabel is the node label Karpenter gives a node's capacity
// type, on-demand or spot.
const capacityTypeLabel = "karpenter.sh/capacity-type"

// spotPrompt is the prompt tokens each of the spot scenario's requests
// carries: long prompts fill the engines' KV cache with few streams, so
// the load past the floor is tens of streams, not hundreds.
const spotPrompt = 6800

// spotAnswer is the scenario's max_tokens: the most the twin's models
// allow, above the sim's longest natural answer (600 tokens), so every
// answer ends on its own and each request reserves a large share of KV.
const spotAnswer = 1024

// spotSettle is added to the wait for a settled 8B fleet before more
// load: Karpenter's batching and the controllers' loops that run
// unscaled.
const spotSettle = 5 * time.Second

// anyWait bounds no wait for a first token: with it, summarize counts
// a request served whenever its stream came whole.
const anyWait = time.Duration(math.MaxInt64)

// spotInFlight is how many streams the interrupted engine must be
// running when the notice comes.
const spotInFlight = 3

// kvLoad is a load sized by the router's arithmetic: its prompt, its
// max_tokens and how many such requests one replica of the model holds.
type kvLoad struct {
	prompt    string
	maxTokens int
	perNode   int
}

// sizeLoad builds a prompt of about promptTokens for model and counts
// how many requests of it with maxTokens one replica's KV cache holds, as
// the kv-aware router counts them (routing.Footprint of the estimate and
// the output cap against the Service's kv-tokens).
func sizeLoad(t *testing.T, model string, promptTokens int64, maxTokens int) kvLoad {
	t.Helper()
	var spec string
	for _, o := range renderExample(t) {
		if s, ok := o.GetAnnotations()[clusterwatch.ModelSpecAnnotation]; ok && o.GetKind() == "Service" && o.GetLabels()[clusterwatch.ModelLabel] == model {
			spec = s
		}
	}
	m, _, err := clusterwatch.ParseModelSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields("the platform serves every model on its floor and scales beyond it when the load asks")
	var b strings.Builder
	estimate := func() int64 {
		content, _ := json.Marshal(b.String())
		return tokens.EstimateChat([]openai.Message{{Role: "user", Content: content}})
	}
	for i := 0; estimate() < promptTokens; i++ {
		b.WriteString(words[i%len(words)] + " ")
	}
	need := routing.Footprint(estimate() + int64(maxTokens))
	if need > int64(m.MaxModelLen) {
		t.Fatalf("%s: a request of %d tokens is longer than the model's %d", model, need, m.MaxModelLen)
	}
	return kvLoad{prompt: b.String(), maxTokens: maxTokens, perNode: int(m.KVCapacityTokens / need)}
}

// spotEngine is a Ready engine of model on a spot node, or an error.
func (r *twinRun) spotEngine(ctx context.Context, model string) (Sim, error) {
	for _, s := range r.eng.Sims(model) {
		if !s.Ready {
			continue
		}
		n, err := r.c.Client.CoreV1().Nodes().Get(ctx, s.Node, metav1.GetOptions{})
		if err == nil && n.Labels[capacityTypeLabel] == "spot" && n.DeletionTimestamp == nil {
			return s, nil
		}
	}
	return Sim{}, fmt.Errorf("no Ready %s engine on a spot node: %v", model, r.eng.Sims(model))
}

// allReadyOffSpot reports whether every live pod of model is Ready and
// on a node that is not spot, and how many there are.
func (r *twinRun) allReadyOffSpot(ctx context.Context, model string) (int, bool) {
	pods, err := r.c.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: clusterwatch.ModelLabel + "=" + model})
	if err != nil {
		return 0, false
	}
	ready := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if !podReady(&p) || p.Spec.NodeName == "" {
			return 0, false
		}
		n, err := r.c.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil || n.Labels[capacityTypeLabel] == "spot" {
			return 0, false
		}
		ready++
	}
	return ready, true
}

// scaleDownWindow is the rendered HPA scale-down stabilisation of the
// ScaledObject of Deployment dep, in real-world time.
func scaleDownWindow(t *testing.T, dep string) time.Duration {
	t.Helper()
	for _, o := range renderExample(t) {
		if o.GetKind() == "ScaledObject" && o.GetName() == dep {
			v, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "advanced", "horizontalPodAutoscalerConfig", "behavior", "scaleDown", "stabilizationWindowSeconds")
			secs, ok := integer(v)
			if !ok {
				t.Fatalf("ScaledObject %s: no scale-down window (%v)", dep, v)
			}
			return time.Duration(secs) * time.Second
		}
	}
	t.Fatalf("no rendered ScaledObject %s", dep)
	return 0
}

// cloudDrains is the orchestrators' count of cloud nodes drained for a
// disrupted Kubernetes Node (llmplat_orchestrator_cloud_drains_total).
func (r *twinRun) cloudDrains(ctx context.Context) float64 {
	var n float64
	for _, o := range r.p.Orchestrators {
		n += scrapeCounter(ctx, "http://"+o.Addr("metrics")+"/metrics", "llmplat_orchestrator_cloud_drains_total")
	}
	return n
}

// scenarioSpot: a spot interruption of a node that runs an 8B replica.
// The 8B's floor is on demand, so a load past what the floor holds first
// brings replicas onto spot (KEDA, Karpenter), and runs until the
// autoscaler's count has held for its scale-down window. The load is then
// what the replicas hold without one of them, and with streams in flight
// on a spot engine EC2's notice comes for its node. The orchestrators
// drain the engine through clusterwatch (the disrupted Node), Karpenter
// evicts the pod, whose preStop waits for its streams; the streams finish
// whole, the requests sent meanwhile are served by the other replicas,
// and the evicted replica's replacement loads on another node.
func (r *twinRun) scenarioSpot(t *testing.T) string {
	t.Helper()
	const (
		model = "llama-8b"
		dep   = "vllm-llama-8b"
		ns    = "llmplat"
	)
	ctx := t.Context()
	load := sizeLoad(t, model, spotPrompt, spotAnswer)
	floor := floors[model] * load.perNode
	window := r.c.Dur(scaleDownWindow(t, dep))
	cut0 := r.eng.StreamsCut()

	r.tl.Mark(fmt.Sprintf("spot: %d streams of the 8B, past the %d its on-demand floor holds", floor+2, floor))
	start := r.tl.Now()
	heavy := callerOptions{Prompt: load.prompt, MaxTokens: load.maxTokens}
	base := r.streamsTo(ctx, model, floor, heavy)
	extra := r.streamsTo(ctx, model, 2, heavy)
	streams := floor + 2
	// New replicas take free GPUs of on-demand nodes before Karpenter
	// buys spot (the scheduler places a pod on a node that fits, the spot
	// preference only ranks them): while every 8B replica is Ready and
	// none is on spot, the load grows past what they hold.
	hold := r.c.Dur(2*time.Minute) + spotSettle
	settled, steady, count := time.Duration(-1), time.Duration(0), int32(-1)
	var spot Sim
	onSpot := time.Duration(-1)
	r.waitFor(t, 60*time.Minute, "the 8B's replicas steady for the autoscaler's scale-down window, one of them on spot", func(Sample) error {
		now := r.tl.Now()
		d, err := r.c.Client.AppsV1().Deployments(ns).Get(ctx, dep, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if want := *d.Spec.Replicas; want != count || d.Status.ReadyReplicas != want || d.Status.Replicas != want {
			steady, count = now, want
		}
		if spot, err = r.spotEngine(ctx, model); err == nil {
			if onSpot < 0 {
				onSpot = now - start
				r.tl.Mark("an 8B replica ready on a spot node")
			}
			if now-steady < window {
				return fmt.Errorf("%d replicas of %s for %s", count, dep, now-steady)
			}
			return nil
		}
		ready, ok := r.allReadyOffSpot(ctx, model)
		switch {
		case !ok:
			settled = -1
		case settled < 0:
			settled = now
		case now-settled >= hold:
			more := ready*load.perNode + 2 - streams
			extra = append(extra, r.streamsTo(ctx, model, more, heavy)...)
			streams += more
			r.tl.Mark(fmt.Sprintf("%d streams of the 8B, past what its %d Ready replicas hold, none on spot", streams, ready))
			settled = -1
		}
		return err
	})
	peak := streams
	// What the replicas hold without the one the notice takes: it is
	// needed, so the autoscaler keeps its count and the replacement.
	fleet := floors[model] + int(count)
	extraCalls := endAll(extra)
	streams = (fleet - 1) * load.perNode
	if streams > floor {
		extra = r.streamsTo(ctx, model, streams-floor, heavy)
	} else {
		extra, streams = nil, floor
	}
	r.tl.Mark(fmt.Sprintf("%d streams: what the 8B's %d replicas hold without one", streams, fleet))
	testenv.EventuallyNil(t, r.c.Dur(5*time.Minute)+waitSlack, fmt.Sprintf("%d streams in flight on the spot engine", spotInFlight), func() error {
		busy, err := BusyRequests(spot.Addr)
		if err == nil && busy < spotInFlight {
			err = fmt.Errorf("%d busy", busy)
		}
		return err
	})
	inFlight, _ := BusyRequests(spot.Addr)
	drains0 := r.cloudDrains(ctx)
	before := map[string]bool{}
	for _, s := range r.eng.Sims(model) {
		before[s.Pod] = true
	}
	in, err := r.eng.InterruptSpot(ctx, spot.Node)
	if err != nil {
		t.Fatal(err)
	}
	noticed := r.tl.Now()
	r.tl.Mark(fmt.Sprintf("EC2's interruption notice for %s: its NodeClaim deleted, %d streams on its engine", spot.Node, inFlight))

	tainted := r.waitStep(t, "the node tainted karpenter.sh/disrupted", func() error {
		n, err := r.c.Client.CoreV1().Nodes().Get(ctx, spot.Node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == disruptedTaint && tn.Effect == corev1.TaintEffectNoSchedule {
				return nil
			}
		}
		return errors.New("no disruption taint")
	})
	drained := r.waitStep(t, "the orchestrators drained its engine (clusterwatch)", func() error {
		if n := r.cloudDrains(ctx); n <= drains0 {
			return fmt.Errorf("cloud drains %g", n)
		}
		return nil
	})
	gone := r.waitStep(t, "the interrupted node gone", func() error {
		_, err := r.c.Client.CoreV1().Nodes().Get(ctx, spot.Node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("node %s still there (%v)", spot.Node, err)
	})
	var replacement Sim
	ready := r.waitStep(t, "a replacement 8B replica ready on another node", func() error {
		for _, s := range r.eng.Sims(model) {
			if s.Ready && s.Node != spot.Node && !before[s.Pod] {
				replacement = s
				return nil
			}
		}
		return errors.New("none yet")
	})
	// The reclaim may find the engine still running (its pod's eviction
	// held by the PodDisruptionBudget while other replicas load): what
	// it ran then counts as cut.
	reclaimed := <-in.Reclaimed
	if drainedAt := r.tl.start.Add(drained); !drainedAt.Before(in.Reclaim) {
		t.Errorf("the orchestrators drained the engine %s after the notice, at or after EC2's reclaim (%s)",
			r.tl.both(drained-noticed), r.tl.both(r.c.Dur(SpotNotice)))
	}
	calls := append(extraCalls, endAll(append(extra, base...))...)
	r.tl.Mark("load stops")

	timing := timingOf(t, r.eng, spot.Pod)
	// Until the notice, the load grows past what the replicas hold and
	// waits in the gateway's queue for new ones: every request must come
	// whole, however long it waited. From the notice on, the load is what
	// the replicas hold without the interrupted one: served in time.
	var early, late []Request
	duringDrain := 0
	for _, c := range calls {
		if c.Sent < noticed {
			early = append(early, c)
			continue
		}
		late = append(late, c)
		if c.Sent <= gone {
			duringDrain++
		}
	}
	whole := summarize(early, start, anyWait)
	if whole.Failed > 0 {
		t.Errorf("%d of the 8B's %d requests before the notice failed; the first, sent %s after the load began: %s",
			whole.Failed, whole.Total, r.tl.both(whole.FirstFail-start), whole.Example)
	}
	served := summarize(late, noticed, r.servedWithin())
	if served.Failed > 0 {
		t.Errorf("%d of the 8B's %d requests from the notice on failed or waited past the queue limit, from %s to %s after the notice; the first: %s",
			served.Failed, served.Total, r.tl.both(served.FirstFail-noticed), r.tl.both(served.LastFail-noticed), served.Example)
	}
	if duringDrain == 0 {
		t.Error("no request was sent between the notice and the node's end: the drain was not under load")
	}
	if cut := r.eng.StreamsCut() - cut0; cut != 0 {
		t.Errorf("%d streams cut by the interruption", cut)
	}
	if timing.Exited.IsZero() {
		t.Errorf("the interrupted engine (pod %s) never ended", spot.Pod)
	}
	maxPods, maxSpot := 0, 0
	var atNotice Sample
	for _, smp := range r.tl.Samples() {
		if smp.At < start {
			continue
		}
		maxPods, maxSpot = max(maxPods, smp.Pods[model]), max(maxSpot, smp.Nodes["gpu-l40s-spot"])
		if smp.At <= noticed {
			atNotice = smp
		}
	}

	r.waitFor(t, 40*time.Minute, "every model back at its floor, no GPU node empty", floorsPacked)

	since := func(d time.Duration) string { return r.tl.both(d - noticed) }
	evicted := "its pod was not seen evicted"
	if !timing.Terminating.IsZero() {
		evicted = "its pod evicted after " + r.tl.both(timing.Terminating.Sub(in.Noticed))
	}
	ended := "the engine stopped after its drain"
	if reclaimed > 0 {
		ended = "EC2's reclaim found the engine still running and ended it"
	}
	return fmt.Sprintf("### 4. Spot interruption\n\n"+
		"Streams of the 8B (prompts of %d tokens) past the %d its on-demand floor of %d replicas holds, %d at the most: "+
		"a first replica ready on a spot node after %s; KEDA went up to %d 8B pods, Karpenter to %d spot nodes. "+
		"Once the autoscaler had held %d replicas for its scale-down window, the load became what they hold without one (%d streams), "+
		"and EC2's notice came for a spot node while its engine ran %d streams "+
		"(%d of the 8B's %d pods Ready). From the notice: the node tainted after %s; the orchestrators drained the engine "+
		"through clusterwatch after %s; %s; %s, %s after the notice (the reclaim comes at %s); the node gone after %s; "+
		"a replacement ready on %s after %s.\n\n"+
		"%d requests (no retries), %d of them failed; %d from the notice on (%d sent before the node's end), %d of them not served within %s; %d streams cut.\n",
		spotPrompt, floor, floors[model], peak, r.tl.both(onSpot), maxPods, maxSpot,
		fleet, streams, inFlight, atNotice.Ready[model], atNotice.Pods[model], since(tainted), since(drained), evicted,
		ended, r.tl.both(timing.Exited.Sub(in.Noticed)), r.tl.both(r.c.Dur(SpotNotice)), since(gone),
		replacement.Node, since(ready),
		len(calls), whole.Failed, served.Total, duringDrain, served.Failed, r.tl.both(r.servedWithin()), r.eng.StreamsCut()-cut0) +
		r.drawn("spot.svg", "A spot interruption of an 8B node", start, []Panel{
			{"the 8B: pods, ready", []Series{PodsOf(model), ReadyOf(model)}},
			{"GPU nodes", []Series{NodesOf("gpu-l40s"), NodesOf("gpu-l40s-spot"), EmptyNodes()}},
			{"requests waiting (the pending gauge)", []Series{PendingOf(model)}},
		})
}

// scrapeCounter reads an unlabelled counter or gauge from a Prometheus
// text exposition at url; 0 when it cannot.
func scrapeCounter(ctx context.Context, url, name string) float64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return n
			}
		}
	}
	return 0
}
