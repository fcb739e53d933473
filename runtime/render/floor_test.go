package render

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// onDemandPools reads the rendered NodePools whose nodes are on-demand
// only (karpenter.sh/capacity-type In [on-demand]).
func onDemandPools(t *testing.T, objs []lintObject) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		if o.Kind != "NodePool" {
			continue
		}
		var np struct {
			Spec struct {
				Template struct {
					Spec struct {
						Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(o.JSON, &np); err != nil {
			t.Fatal(err)
		}
		for _, r := range np.Spec.Template.Spec.Requirements {
			if r.Key == "karpenter.sh/capacity-type" && r.Operator == corev1.NodeSelectorOpIn && slices.Equal(r.Values, []string{"on-demand"}) {
				out = append(out, o.Name)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no on-demand NodePool rendered")
	}
	return out
}

// onDemandOnly reports whether every node a pod may run on is in one of
// pools (its required node affinity names only those).
func onDemandOnly(pod corev1.PodSpec, pools []string) bool {
	a := pod.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, term := range terms {
		ok := false
		for _, r := range term.MatchExpressions {
			ok = ok || r.Key == "karpenter.sh/nodepool" && r.Operator == corev1.NodeSelectorOpIn &&
				len(r.Values) > 0 && !slices.ContainsFunc(r.Values, func(v string) bool { return !slices.Contains(pools, v) })
		}
		if !ok {
			return false
		}
	}
	return len(terms) > 0
}

// TestOnDemandFloorSurvivesReclaim: a model allowed on spot keeps its
// whole floor (min_replicas, at least 2 for the EKS module) on on-demand
// nodes, whatever the spot pool does: replicas that must run there, not
// a spread that prefers it (issue 30, item 13). Its Deployments together
// keep the workload's bounds, select disjoint pods (the HPA counts the
// ready pods its target selects), and the model's Service routes to all.
func TestOnDemandFloorSurvivesReclaim(t *testing.T) {
	p := example(t)
	objs := renderedForLint(t)["platform"]
	pools := onDemandPools(t, objs)
	ws, err := workloads(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Models {
		t.Run(m.Name, func(t *testing.T) {
			wl := p.Plan.Workloads[workloadOf(p, m.Name)]
			lo, hi, floor := 0, 0, 0
			var pods []labels.Set
			for _, w := range ws {
				if w.Labels["llmplat.io/model"] != m.Name {
					continue
				}
				lo, hi = lo+w.Min, hi+w.Max
				if onDemandOnly(w.Pod.Spec, pools) {
					floor += w.Min
				}
				pods = append(pods, labels.Set(w.Pod.Labels))
			}
			if lo != wl.MinReplicas || hi != wl.MaxReplicas {
				t.Errorf("replicas %d..%d over its Deployments, want the workload's %d..%d", lo, hi, wl.MinReplicas, wl.MaxReplicas)
			}
			if want := wl.MinReplicas; m.Spot && floor < want {
				t.Errorf("%d replica(s) bound to on-demand nodes, want the floor of %d to survive a spot reclaim", floor, want)
			}
			for _, o := range objs {
				if o.Kind != "Deployment" && o.Kind != "Service" || !strings.HasPrefix(o.Name, "vllm-"+m.Name) {
					continue
				}
				sel := selectorOf(t, o)
				n := 0
				for _, pod := range pods {
					if sel.Matches(pod) {
						n++
					}
				}
				if o.Kind == "Service" && n != len(pods) || o.Kind == "Deployment" && n != 1 {
					t.Errorf("%s selects the pods of %d of the model's %d Deployments", o.id(), n, len(pods))
				}
			}
		})
	}
}

// selectorOf is a Deployment's or a Service's pod selector.
func selectorOf(t *testing.T, o lintObject) labels.Selector {
	t.Helper()
	if o.Kind == "Service" {
		var s corev1.Service
		if err := json.Unmarshal(o.JSON, &s); err != nil {
			t.Fatal(err)
		}
		return labels.SelectorFromSet(s.Spec.Selector)
	}
	var d appsv1.Deployment
	if err := json.Unmarshal(o.JSON, &d); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// TestSpotNeedsRoomAboveTheFloor: a spot model whose floor is its cap
// would leave spot nothing; both ways of rendering refuse it, naming spot.
func TestSpotNeedsRoomAboveTheFloor(t *testing.T) {
	p := example(t)
	i := slices.IndexFunc(p.Models, func(m Model) bool { return m.Spot })
	if i < 0 {
		t.Fatal("the example has no spot model")
	}
	w := workloadOf(p, p.Models[i].Name)
	p.Plan.Workloads[w].MaxReplicas = p.Plan.Workloads[w].MinReplicas
	if _, err := Render(p); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "spot") {
		t.Errorf("Render = %v, want ErrInvalid naming spot", err)
	}
	d := deploymentOf(p, i)
	if _, err := RenderModel(d); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "spot") {
		t.Errorf("RenderModel = %v, want ErrInvalid naming spot", err)
	}
}

// TestLivenessSparesLoadingAndBusyEngines: the engine's liveness probe
// waits for the startup probe (a loading model answers nothing for
// minutes) and tolerates a busy engine's slow /health for at least
// minLivenessWindow before a restart drops its streams (item 17).
func TestLivenessSparesLoadingAndBusyEngines(t *testing.T) {
	// A minute: several of vLLM's slowest scheduler steps under a full
	// batch, far beyond one late /health.
	const minLivenessWindow, minLivenessTimeout = 60, 5
	ws, err := workloads(renderedForLint(t)["platform"])
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range ws {
		if !w.isModel() {
			continue
		}
		for _, c := range w.Pod.Spec.Containers {
			n++
			l, s := c.LivenessProbe, c.StartupProbe
			if l == nil || s == nil {
				t.Errorf("%s %s: liveness %v, startup %v; want both", w.Object, c.Name, l, s)
				continue
			}
			if window := l.PeriodSeconds * l.FailureThreshold; window < minLivenessWindow || l.TimeoutSeconds < minLivenessTimeout {
				t.Errorf("%s %s: a restart after %d s of failures, %d s per check; want at least %d s and %d s",
					w.Object, c.Name, window, l.TimeoutSeconds, minLivenessWindow, minLivenessTimeout)
			}
			if s.PeriodSeconds*s.FailureThreshold <= l.PeriodSeconds*l.FailureThreshold {
				t.Errorf("%s %s: the startup probe allows less time than liveness", w.Object, c.Name)
			}
		}
	}
	if n == 0 {
		t.Fatal("no model engine rendered")
	}
}
