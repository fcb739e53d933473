package render

import (
	"encoding/json"
	"errors"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// lintPDBs checks every PodDisruptionBudget against the workloads it
// selects, and that each model has exactly one covering all its pods.
func lintPDBs(objs []lintObject, ws []workload) ([]finding, error) {
	var out []finding
	budgets := map[string][]string{} // a model workload → the PDBs selecting it
	for _, o := range objs {
		if o.Kind != "PodDisruptionBudget" {
			continue
		}
		var pdb policyv1.PodDisruptionBudget
		if err := json.Unmarshal(o.JSON, &pdb); err != nil {
			return nil, fmt.Errorf("%s: %w", o.id(), err)
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Spec.Selector == nil {
			out = append(out, finding{rulePDB, o.id(), "", fmt.Sprintf("selector unreadable: %v", err)})
			continue
		}
		lo, hi, model := 0, 0, false
		for _, w := range ws {
			if w.Namespace != o.Namespace || w.Min < 0 || !sel.Matches(labels.Set(w.Pod.Labels)) {
				continue
			}
			lo, hi = lo+w.Min, hi+w.Max
			if w.isModel() {
				model = true
				budgets[w.Object] = append(budgets[w.Object], o.id())
			}
		}
		if hi == 0 {
			out = append(out, finding{rulePDB, o.id(), "", "selects no workload's pods"})
			continue
		}
		for n := max(1, lo); n <= min(hi, lintMaxReplicas); n++ {
			if keep, err := mustKeep(pdb.Spec, n); err != nil || keep < 1 {
				out = append(out, finding{rulePDB, o.id(), "", fmt.Sprintf("with %d replica(s) it lets eviction take the last ready one (keeps %d, %v)", n, keep, err)})
				break
			}
		}
		p := pdb.Spec.UnhealthyPodEvictionPolicy
		if model && (p == nil || *p != policyv1.AlwaysAllow) {
			out = append(out, finding{rulePDB, o.id(), "", "a model's budget without unhealthyPodEvictionPolicy: AlwaysAllow lets a crash-looping pod block a drain"})
		}
	}
	for _, w := range ws {
		switch n := len(budgets[w.Object]); {
		case w.isModel() && n == 0:
			out = append(out, finding{rulePDB, w.Object, "", "no PodDisruptionBudget selects its pods"})
		case n > 1:
			out = append(out, finding{rulePDB, w.Object, "", fmt.Sprintf("%d budgets select its pods: eviction refuses such pods", n)})
		}
	}
	return out, nil
}

// mustKeep is how many of n replicas a budget keeps ready (the disruption
// controller's desiredHealthy): eviction may take the last ready one
// when it is below 1.
func mustKeep(s policyv1.PodDisruptionBudgetSpec, n int) (int, error) {
	switch {
	case s.MinAvailable != nil && s.MaxUnavailable == nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(s.MinAvailable, n, true)
		return v, err
	case s.MaxUnavailable != nil && s.MinAvailable == nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(s.MaxUnavailable, n, true)
		return n - v, err
	}
	return 0, errors.New("exactly one of minAvailable and maxUnavailable is needed")
}
