package twin

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

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

// servedWithin is the longest a caller may wait for its first token and
// count as served: the gateway's queue limit on the twin's clock
// (Cluster.QueueLimit), after which production answers 503; a first token
// that came later for another reason was not served in time either.
func (r *twinRun) servedWithin() time.Duration {
	return r.c.QueueLimit()
}

// served sums up a caller's requests: how many, how many failed or waited
// past within for their first token, the first and last of those, and the
// longest stretch between two first tokens (from the drift's start).
type served struct {
	Total, Failed          int
	FirstFail, LastFail    time.Duration
	LongestGap, GapStarted time.Duration
	Example                string
}

func summarize(reqs []Request, from, within time.Duration) served {
	var s served
	last := from
	for _, q := range reqs {
		s.Total++
		if q.Status == 200 && q.Err == "" && q.FirstToken-q.Sent > within {
			q.Err = fmt.Sprintf("first token after %v", q.FirstToken-q.Sent)
		}
		if q.Status != 200 || q.Err != "" {
			if s.Failed == 0 {
				s.FirstFail, s.Example = q.Sent, fmt.Sprintf("%d: %s", q.Status, q.Err)
			}
			s.Failed++
			s.LastFail = q.Sent
			if q.FirstToken == 0 {
				continue
			}
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

// floorsPacked is nil when every model runs its floor and no GPU node is
// empty.
func floorsPacked(s Sample) error {
	if s.Empty > 0 {
		return fmt.Errorf("%d empty GPU nodes", s.Empty)
	}
	return atFloors(s)
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
	began := r.tl.Now()
	var models []string
	for m, n := range floors {
		if n > 0 {
			models = append(models, m)
		}
	}
	sort.Strings(models)
	// The floors' nodes alone: an empty node left from before (the wake's,
	// the floors' first launch) would drift too and blur the figures.
	r.waitFor(t, 20*time.Minute, "no GPU node left empty before the drift", floorsPacked)
	busy := len(r.tl.Last().Shapes)
	stopWatch := r.watchCluster(ctx, max(r.c.Dur(2*time.Second), 100*time.Millisecond))
	callers := map[string]*caller{}
	for _, m := range models {
		callers[m] = r.streamTo(ctx, m, trickle)
	}
	// A caller's first request is in before the drift starts.
	testenv.EventuallyNil(t, waitSlack, "callers streaming", func() error {
		for m, c := range callers {
			if len(c.requests()) == 0 {
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
	r.waitFor(t, 40*time.Minute, "no GPU node left empty after the drift", floorsPacked)
	lives := stopWatch()

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
	fmt.Fprintf(&b, "\n| model | requests | not served within %s | longest without a first token | zero Ready: longest (total) |\n|---|---:|---:|---:|---:|\n",
		r.tl.both(r.servedWithin()))
	samples := r.tl.Samples()
	for _, m := range models {
		s := summarize(reqs[m], start, r.servedWithin())
		longest, at, total := zeroReady(samples, m, start)
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s (%s) |\n", m, s.Total, s.Failed, r.tl.both(s.LongestGap), r.tl.both(longest), r.tl.both(total))
		if s.Failed > 0 {
			t.Errorf("%s: %d of %d requests failed or waited past the queue limit during the drift, from %s to %s after the bump; the first: %s",
				m, s.Failed, s.Total, r.tl.both(s.FirstFail-start), r.tl.both(s.LastFail-start), s.Example)
		}
		if longest > 0 {
			t.Errorf("%s had no Ready replica for %s from %s after the bump (%s in all)", m, r.tl.both(longest), r.tl.both(at-start), r.tl.both(total))
		}
	}
	// The floors fit on the nodes they ran on before (Karpenter's
	// replacement is launched for their pods): a drift that leaves them
	// spread over more GPU nodes costs those nodes for good, as
	// consolidation takes only empty ones.
	if end := r.tl.Last().Shapes; len(end) > busy {
		t.Errorf("the drift left the floors on %d GPU nodes, %d before: %s", len(end), busy, strings.Join(end, "; "))
	}
	cut := r.eng.StreamsCut() - cutBefore
	if cut != 0 {
		t.Errorf("%d streams cut during the drift", cut)
	}
	fmt.Fprintf(&b, "\n%d streams cut. GPU nodes at the end: %s.\n", cut, strings.Join(r.tl.Last().Shapes, "; "))
	b.WriteString(r.drawn("drift.svg", "An AMI drift at the warm floors", began, []Panel{
		{"replicas ready", []Series{ReadyOf("llama-8b"), ReadyOf("qwen-32b")}},
		{"GPU nodes", []Series{NodesOf("gpu-l40s"), NodesOf("gpu-l40s-spot"), EmptyNodes()}},
		{"requests waiting (the pending gauge)", []Series{PendingOf("llama-8b"), PendingOf("qwen-32b")}},
	}))
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
