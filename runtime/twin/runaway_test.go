package twin

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/llmplat/llmplat/runtime/loadgen"
)

const (
	// runawayModel is the model the runaway demand goes to: warm at its
	// floor, with the fewest streams per replica, so its max_replicas'
	// worth is a load the twin's machine carries several times over.
	runawayModel = "qwen-32b"
	// runawayStreams is the runaway's concurrent streams: about twice
	// what the 32B's max_replicas serve (5 replicas of about 18 streams
	// of a 2k-token prompt and a 1k-token answer in its KV cache).
	runawayStreams = 180
	// runawayRamp is the runaway's climb: a fast one, as a caller's batch
	// job starts.
	runawayRamp = 2 * time.Minute
	// runawayHold is how long the runaway lasts: past the 32B's cold
	// start (1,071 s) and its nodes' launch, so that every replica KEDA
	// asks for serves, and the demand is still beyond them.
	runawayHold = 30 * time.Minute
	// refusalSlack is how much later than the queue limit the twin
	// accepts a refusal: its own delays on a busy machine (the hops to
	// the gateway and back, process scheduling), in twin time.
	refusalSlack = 2 * time.Second
)

// scenarioRunaway: demand for the 32B about twice what its
// max_replicas serve. KEDA asks for no more than its maxReplicaCount, no
// NodePool runs more GPUs than its limits, the demand past what the
// replicas serve is answered 503 with a Retry-After at the gateway's
// queue limit (not held longer, nothing else fails, no stream cut), and
// once the demand stops the twin is back at its floors with no empty GPU
// node.
func (r *twinRun) scenarioRunaway(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	maxReplicas := r.maxReplicas(t, runawayModel)
	limits := r.gpuLimits(t)
	began := r.tl.Now()
	cutBefore := r.eng.StreamsCut()
	r.tl.Mark(fmt.Sprintf("runaway demand for the %s: %d streams (its maxReplicaCount %d)", runawayModel, runawayStreams, maxReplicas))
	watch := r.watchScaling(r.tl.Last())
	d := r.drive(ctx, loadgen.Plan{Models: []loadgen.Weighted{{Model: runawayModel, Weight: 1}}, Rate: closedLoop,
		Duration: r.c.Dur(runawayRamp + runawayHold), Concurrency: runawayStreams, Ramp: r.c.Dur(runawayRamp),
		PromptTokens: referencePromptTokens, MaxTokens: loadAnswerTokens, IgnoreEOS: true, Seed: 6})
	if _, err := d.wait(); err != nil {
		t.Fatalf("the runaway demand: %v", err)
	}
	r.tl.Mark("the runaway demand stops")
	r.waitFor(t, 40*time.Minute, "every model back at its floor", atFloors)
	r.waitFor(t, 20*time.Minute, "at the floors, no GPU node left empty", floorsPacked)
	marks := watch()
	end := r.tl.Now()
	finished := d.Finished()

	// The caps: replicas asked, GPUs bought.
	mostGPUs := map[string]int64{}
	window := r.tl.Between(began, end)
	for _, s := range window.Samples() {
		for pool, n := range s.GPUs {
			mostGPUs[pool] = max(mostGPUs[pool], n)
		}
	}
	if most := marks.mostAsked[runawayModel]; most > maxReplicas {
		t.Errorf("KEDA asked for %d replicas of the %s, past its maxReplicaCount %d", most, runawayModel, maxReplicas)
	} else if most < maxReplicas {
		t.Errorf("KEDA asked for at most %d replicas of the %s under a demand past its maxReplicaCount %d: the runaway never reached the cap", most, runawayModel, maxReplicas)
	}
	for pool, n := range mostGPUs {
		if limit, ok := limits[pool]; ok && n > limit {
			t.Errorf("NodePool %s ran %d GPUs, past its limit %d", pool, n, limit)
		}
	}
	// The refusals: 503 with a Retry-After, at the queue limit.
	kinds := classify(finished)
	for kind, n := range kinds {
		if kind != queueRefusal && kind != "ok" {
			t.Errorf("%d requests of the runaway ended %s (the first: %s)", n.count, kind, n.first)
		}
	}
	refused := kinds[queueRefusal].count
	if refused == 0 {
		t.Errorf("no request of the runaway was refused at the queue limit: the demand never passed what %d replicas serve", maxReplicas)
	}
	if n := withoutRetryAfter(finished); n > 0 {
		t.Errorf("%d refusals of the runaway came without a Retry-After", n)
	}
	var waits []time.Duration
	retryAfter := map[string]int{}
	for _, f := range finished {
		if endKind(f.Err) == queueRefusal {
			waits = append(waits, f.Ended.Sub(f.Sent))
			retryAfter[retryAfterOf(f.Err)]++
		}
	}
	longest := loadgen.Quantile(waits, 1)
	if longest > r.c.QueueLimit()+refusalSlack {
		t.Errorf("a refusal of the runaway came %v after its request: past the queue limit %v and the twin's %v of slack", longest, r.c.QueueLimit(), refusalSlack)
	}
	if cut := r.eng.StreamsCut() - cutBefore; cut != 0 {
		t.Errorf("%d streams cut during the runaway", cut)
	}
	r.pictures["runaway.svg"] = window.SVG(fmt.Sprintf("Runaway demand for the %s: %d streams, its maxReplicaCount %d", runawayModel, runawayStreams, maxReplicas), []Panel{
		{"the " + runawayModel + ": replicas asked, ready", []Series{ReplicasOf(runawayModel), ReadyOf(runawayModel)}},
		{"GPUs per NodePool", []Series{GPUsOf("gpu-l40s"), GPUsOf("gpu-l40s-spot")}},
		{"requests waiting (the pending gauge)", []Series{PendingOf(runawayModel)}},
		{"refused at the queue limit, per minute", []Series{r.tl.RefusalsOf(runawayModel, r.c.Dur(ttftWindow))}},
		{"time to first token, p50 and p95 over a minute (real s)", []Series{r.tl.TTFTOf(runawayModel, 0.5, r.c.Dur(ttftWindow)), r.tl.TTFTOf(runawayModel, 0.95, r.c.Dur(ttftWindow))}},
	})
	lat := ttftByModel(r, finished, marks.woke)[runawayModel]
	var b strings.Builder
	fmt.Fprintf(&b, "### 6. Runaway demand\n\n%d concurrent streams of the %s (2k-token prompts, %d-token answers), climbing over %s and lasting %s; "+
		"its maxReplicaCount is %d; at scale %g, %s in all.\n\n",
		runawayStreams, runawayModel, loadAnswerTokens, r.tl.both(r.c.Dur(runawayRamp)), r.tl.both(r.c.Dur(runawayHold)), maxReplicas, r.c.Scale, r.tl.both(end-began))
	fmt.Fprintf(&b, "KEDA asked for at most %d replicas (first above the floor at %s); GPUs per NodePool at most %s (limits %s).\n\n",
		marks.mostAsked[runawayModel], marks.firstScale, describeGPUs(mostGPUs), describeGPUs(limits))
	fmt.Fprintf(&b, "Of %d requests, %d were served (TTFT p50 %.1f s, p95 %.1f s real) and %d refused with 503 at the queue limit "+
		"(%s on the twin's clock; the longest refusal came %s after its request), every one with a Retry-After (%s); %d streams cut.\n\n",
		len(finished), kinds["ok"].count, lat.p50.Seconds(), lat.p95.Seconds(), refused, r.tl.both(r.c.QueueLimit()), r.tl.both(longest),
		describeCounts(retryAfter), r.eng.StreamsCut()-cutBefore)
	b.WriteString("![runaway demand](twin/runaway.svg)\n\n" + window.EventTable())
	return b.String()
}

// maxReplicas is the sum of the maxReplicaCount of the ScaledObjects
// that scale model's engine Deployments.
func (r *twinRun) maxReplicas(t *testing.T, model string) int {
	t.Helper()
	ctx := t.Context()
	deps, err := r.c.Client.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: modelLabel + "=" + model})
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	for _, d := range deps.Items {
		ours[d.Namespace+"/"+d.Name] = true
	}
	dyn, err := dynamic.NewForConfig(r.c.Config)
	if err != nil {
		t.Fatal(err)
	}
	sos, err := dyn.Resource(scaledObjectGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, so := range sos.Items {
		target, _, _ := unstructured.NestedString(so.Object, "spec", "scaleTargetRef", "name")
		n, ok, _ := unstructured.NestedInt64(so.Object, "spec", "maxReplicaCount")
		if ours[so.GetNamespace()+"/"+target] && ok {
			total += int(n)
		}
	}
	if total == 0 {
		t.Fatalf("no ScaledObject with a maxReplicaCount scales %s", model)
	}
	return total
}

// gpuLimits is each NodePool's limit of GPUs (spec.limits).
func (r *twinRun) gpuLimits(t *testing.T) map[string]int64 {
	t.Helper()
	dyn, err := dynamic.NewForConfig(r.c.Config)
	if err != nil {
		t.Fatal(err)
	}
	pools, err := dyn.Resource(nodePools).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, p := range pools.Items {
		v, ok, _ := unstructured.NestedFieldNoCopy(p.Object, "spec", "limits", string(GPUResource))
		if !ok {
			continue
		}
		var n int64
		if _, err := fmt.Sscan(fmt.Sprint(v), &n); err != nil {
			t.Fatalf("NodePool %s: GPU limit %v: %v", p.GetName(), v, err)
		}
		out[p.GetName()] = n
	}
	if len(out) == 0 {
		t.Fatal("no NodePool limits its GPUs")
	}
	return out
}

// retryAfterOf is a refusal's Retry-After header ("" when none).
func retryAfterOf(err error) string {
	var refused *loadgen.StatusError
	if errors.As(err, &refused) {
		return refused.RetryAfter
	}
	return ""
}

// describeGPUs is "gpu-l40s 12, gpu-l40s-spot 0".
func describeGPUs(gpus map[string]int64) string {
	var parts []string
	for _, pool := range slices.Sorted(maps.Keys(gpus)) {
		parts = append(parts, fmt.Sprintf("%s %d", pool, gpus[pool]))
	}
	return strings.Join(parts, ", ")
}

// describeCounts is `"5" × 120` for each value and its count.
func describeCounts(counts map[string]int) string {
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%q × %d", v, counts[v]))
	}
	return strings.Join(parts, ", ")
}
