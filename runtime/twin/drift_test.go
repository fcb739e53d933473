package twin

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// nodePools is Karpenter's NodePool resource.
var nodePools = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}

// amiReleaseAnnotation is the NodePools' template annotation bumpAMI
// changes: the twin's stand-in for the EC2NodeClass's AMI release.
const amiReleaseAnnotation = "twin.llmplat.io/ami-release"

// disruptedTaint is the taint Karpenter puts on a Node it has chosen to
// disrupt, before it launches the Node's replacement.
const disruptedTaint = "karpenter.sh/disrupted"

// bumpAMI plays an AMI bump (a new gpu_pool.ami_alias) on the twin. In
// production the EC2NodeClass's AMI changes and Karpenter's AWS provider
// reports every node of it drifted; the kwok provider has no AMI and
// reports no drift of its own, so the twin changes what Karpenter's core
// drift does compare: every NodePool's template, through an annotation,
// which changes the pool's hash (karpenter.sh/nodepool-hash) and so marks
// every node of every GPU pool Drifted, as the new AMI would. From there
// on Karpenter's disruption (budgets, replacements, drains, the
// terminationGracePeriod) runs as it would for an AMI. It returns the
// GPU nodes that drift.
func (r *twinRun) bumpAMI(t *testing.T, release string) []string {
	t.Helper()
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(r.c.Config)
	if err != nil {
		t.Fatal(err)
	}
	pools, err := dyn.Resource(nodePools).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := r.c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodePoolLabel})
	if err != nil {
		t.Fatal(err)
	}
	var drifting []string
	for _, n := range nodes.Items {
		drifting = append(drifting, n.Name)
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{amiReleaseAnnotation: release}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools.Items {
		if _, err := dyn.Resource(nodePools).Patch(ctx, p.GetName(), types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: "llmplat-twin-ami-bump"}); err != nil {
			t.Fatalf("twin: bump the AMI of NodePool %s: %v", p.GetName(), err)
		}
	}
	sort.Strings(drifting)
	return drifting
}

// nodeLife is when the twin saw a GPU node's steps, in twin time since the
// recording began (zero: not seen).
type nodeLife struct {
	Pool                    string
	Joined, Disrupted, Gone time.Duration
}

// watchNodes records every GPU node's arrival, disruption taint and
// departure on r.tl until stop is called, which returns what it saw.
func (r *twinRun) watchNodes(ctx context.Context, period time.Duration) (stop func() map[string]*nodeLife) {
	seen := map[string]*nodeLife{}
	var mu sync.Mutex
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		first := true
		for {
			nodes, err := r.c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodePoolLabel})
			if err == nil {
				mu.Lock()
				now := r.tl.Now()
				here := map[string]bool{}
				for _, n := range nodes.Items {
					here[n.Name] = true
					l := seen[n.Name]
					if l == nil {
						l = &nodeLife{Pool: n.Labels[nodePoolLabel]}
						seen[n.Name] = l
						if !first {
							l.Joined = now
							r.tl.Mark(fmt.Sprintf("node %s joined (%s)", n.Name, l.Pool))
						}
					}
					if l.Disrupted == 0 && slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == disruptedTaint }) {
						l.Disrupted = now
						r.tl.Mark(fmt.Sprintf("node %s tainted %s", n.Name, disruptedTaint))
					}
				}
				for name, l := range seen {
					if !here[name] && l.Gone == 0 {
						l.Gone = now
						r.tl.Mark(fmt.Sprintf("node %s gone", name))
					}
				}
				first = false
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(period):
			}
		}
	}()
	return func() map[string]*nodeLife {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// caller streams chat completions to one model back to back, as an SDK
// with its default retries, until stopped; each request is recorded on
// r.tl as well.
type caller struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	reqs []Request
}

// callerPause is a caller's pause between two requests (real-world):
// a steady trickle, not a load that would scale the model.
const callerPause = 5 * time.Second

// callerTokens is each request's answer length: a stream that runs
// across a few of the sim's token steps, so a cut one shows.
const callerTokens = 32

// streamTo starts a caller of model.
func (r *twinRun) streamTo(ctx context.Context, model string) *caller {
	c := &caller{stop: make(chan struct{}), done: make(chan struct{})}
	sdk := r.c.NewSDK(r.p.URL, r.key)
	go func() {
		defer close(c.done)
		for i := 0; ; i++ {
			select {
			case <-c.stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			req := sdk.StreamChat(ctx, r.tl, model, fmt.Sprintf("Still there? (%d)", i), callerTokens)
			c.mu.Lock()
			c.reqs = append(c.reqs, req)
			c.mu.Unlock()
			select {
			case <-c.stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(r.c.Dur(callerPause)):
			}
		}
	}()
	return c
}

// end stops the caller after its request in flight and returns its
// requests.
func (c *caller) end() []Request {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reqs)
}

// served sums up a caller's requests: how many, how many failed, the
// first and last failure, and the longest stretch between two first
// tokens (from the drift's start).
type served struct {
	Total, Failed          int
	FirstFail, LastFail    time.Duration
	LongestGap, GapStarted time.Duration
	Example                string
}

func summarize(reqs []Request, from time.Duration) served {
	var s served
	last := from
	for _, q := range reqs {
		s.Total++
		if q.Status != 200 || q.Err != "" {
			if s.Failed == 0 {
				s.FirstFail, s.Example = q.Sent, fmt.Sprintf("%d: %s", q.Status, q.Err)
			}
			s.Failed++
			s.LastFail = q.Sent
			continue
		}
		if gap := q.FirstToken - last; gap > s.LongestGap {
			s.LongestGap, s.GapStarted = gap, last
		}
		last = q.FirstToken
	}
	return s
}

// zeroReady is the longest stretch of samples from from on in which model
// had no Ready replica, its start, and the total of such stretches.
func zeroReady(samples []Sample, model string, from time.Duration) (longest, at, total time.Duration) {
	var start time.Duration = -1
	for _, s := range samples {
		if s.At < from {
			continue
		}
		switch {
		case s.Ready[model] == 0 && start < 0:
			start = s.At
		case s.Ready[model] > 0 && start >= 0:
			if d := s.At - start; d > longest {
				longest, at = d, start
			}
			total += s.At - start
			start = -1
		}
	}
	if start >= 0 && len(samples) > 0 {
		d := samples[len(samples)-1].At - start
		if d > longest {
			longest, at = d, start
		}
		total += d
	}
	return longest, at, total
}

// driftWithin bounds the drift in real-world time: the node's
// terminationGracePeriod (1 h) plus a 32B cold start (1,071 s), a pod's
// grace (330 s) and a margin for Karpenter's unscaled loops.
const driftWithin = 2 * time.Hour

// scenarioDrift: an AMI bump from the warm floors, with a caller
// streaming to every model that has a floor. Karpenter replaces each
// drifted GPU node (the Drifted budget: one at a time); no model with a
// floor may lose service while it does: never zero Ready replicas, every
// request served, no stream cut. The drifted nodes are all gone at the
// end, and the twin is back at its floors with no empty GPU node.
func (r *twinRun) scenarioDrift(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	cutBefore := r.eng.StreamsCut()
	var models []string
	for m, n := range floors {
		if n > 0 {
			models = append(models, m)
		}
	}
	sort.Strings(models)
	stopNodes := r.watchNodes(ctx, max(r.c.Dur(2*time.Second), 100*time.Millisecond))
	callers := map[string]*caller{}
	for _, m := range models {
		callers[m] = r.streamTo(ctx, m)
	}
	// A caller's first request is in before the drift starts.
	testenv.EventuallyNil(t, waitSlack, "callers streaming", func() error {
		for m, c := range callers {
			c.mu.Lock()
			n := len(c.reqs)
			c.mu.Unlock()
			if n == 0 {
				return fmt.Errorf("no request of %s done yet", m)
			}
		}
		return nil
	})
	start := r.tl.Now()
	r.tl.Mark("AMI bump: every GPU NodePool's template changed")
	drifting := r.bumpAMI(t, "al2023@v20990101")
	t.Logf("drifting GPU nodes: %v", drifting)
	testenv.EventuallyNil(t, r.c.Dur(driftWithin)+waitSlack, "every drifted GPU node replaced", func() error {
		nodes, err := r.c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodePoolLabel})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if slices.Contains(drifting, n.Name) {
				return fmt.Errorf("drifted node %s still here", n.Name)
			}
		}
		return atFloors(r.tl.Last())
	})
	replaced := r.tl.Now()
	r.tl.Mark("every drifted GPU node replaced, every model at its floor")
	reqs := map[string][]Request{}
	for m, c := range callers {
		reqs[m] = c.end()
	}
	r.waitFor(t, 40*time.Minute, "no GPU node left empty after the drift", func(s Sample) error {
		if s.Empty > 0 {
			return fmt.Errorf("%d empty GPU nodes", s.Empty)
		}
		return atFloors(s)
	})
	lives := stopNodes()

	var b strings.Builder
	fmt.Fprintf(&b, "### 5. AMI drift\n\nThe GPU nodes' AMI bumped at the warm floors (%s), a caller streaming to each model with a floor.\n\n",
		strings.Join(drifting, ", "))
	fmt.Fprintf(&b, "Every drifted node replaced and every model at its floor %s after the bump.\n\n", r.tl.both(replaced-start))
	b.WriteString("| node | pool | tainted | gone |\n|---|---|---:|---:|\n")
	for _, name := range drifting {
		l := lives[name]
		if l == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, l.Pool, r.tl.since(l.Disrupted, start), r.tl.since(l.Gone, start))
	}
	b.WriteString("\n| model | requests | failed | longest without a first token | zero Ready: longest (total) |\n|---|---:|---:|---:|---:|\n")
	samples := r.tl.Samples()
	for _, m := range models {
		s := summarize(reqs[m], start)
		longest, at, total := zeroReady(samples, m, start)
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s (%s) |\n", m, s.Total, s.Failed, r.tl.both(s.LongestGap), r.tl.both(longest), r.tl.both(total))
		if s.Failed > 0 {
			t.Errorf("%s: %d of %d requests failed during the drift, from %s to %s after the bump; the first: %s",
				m, s.Failed, s.Total, r.tl.both(s.FirstFail-start), r.tl.both(s.LastFail-start), s.Example)
		}
		if longest > 0 {
			t.Errorf("%s had no Ready replica for %s from %s after the bump (%s in all)", m, r.tl.both(longest), r.tl.both(at-start), r.tl.both(total))
		}
	}
	cut := r.eng.StreamsCut() - cutBefore
	if cut != 0 {
		t.Errorf("%d streams cut during the drift", cut)
	}
	fmt.Fprintf(&b, "\n%d streams cut. GPU nodes at the end: %s.\n", cut, strings.Join(r.tl.Last().Shapes, "; "))
	return b.String()
}

// since is at relative to from, in twin and real-world seconds; "—"
// when at was never seen.
func (tl *Timeline) since(at, from time.Duration) string {
	if at == 0 {
		return "—"
	}
	return tl.both(at - from)
}

// TestTwinDrift runs the AMI drift on its own twin (development).
func TestTwinDrift(t *testing.T) {
	r := startTwin(t, reducedScale)
	if r == nil {
		return
	}
	r.waitFor(t, 20*time.Minute, "the warm floors ready", atFloors)
	section := r.scenarioDrift(t)
	t.Logf("section:\n%s", section)
	t.Logf("events:\n%s", r.tl.EventTable())
}
