package render

import (
	"strings"
	"testing"
	"time"
)

// TestGPUNodesArePinnedAndBudgeted: the GPU nodes' AMI is a pinned AL2023
// release, never @latest; each GPU pool consolidates only empty nodes,
// replaces drifted nodes one at a time, and bounds a node's drain by a
// terminationGracePeriod longer than every model pod's own grace (so a PDB
// that protects a single replica delays a drain but cannot block it, and
// the pod still gets its full drain when Karpenter deletes it) (issue 30).
func TestGPUNodesArePinnedAndBudgeted(t *testing.T) {
	p := example(t)
	files, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	var pools []map[string]any
	var podGraces []int
	for _, f := range files {
		for _, d := range docs(t, f) {
			switch d["kind"] {
			case "EC2NodeClass":
				terms := dig(t, d, "spec", "amiSelectorTerms").([]any)
				alias, _ := dig(t, terms, 0, "alias").(string)
				if len(terms) != 1 || alias != DefaultAMIAlias || strings.HasSuffix(alias, "@latest") {
					t.Errorf("EC2NodeClass amiSelectorTerms %v, want the pinned %s", terms, DefaultAMIAlias)
				}
			case "NodePool":
				pools = append(pools, d)
			case "Deployment":
				if strings.HasPrefix(f.Name, "model-") {
					podGraces = append(podGraces, dig(t, d, "spec", "template", "spec", "terminationGracePeriodSeconds").(int))
				}
			}
		}
	}
	// A spot model has two Deployments (its on-demand floor and the scaled
	// one); every model has at least one.
	if len(pools) != 2 || len(podGraces) < len(p.Models) {
		t.Fatalf("%d NodePools and %d model Deployments, want 2 and at least %d", len(pools), len(podGraces), len(p.Models))
	}
	for _, np := range pools {
		name := dig(t, np, "metadata", "name")
		if got := dig(t, np, "spec", "disruption", "consolidationPolicy"); got != "WhenEmpty" {
			t.Errorf("%s: consolidationPolicy %v, want WhenEmpty (a busy GPU node is never consolidated)", name, got)
		}
		drifted := ""
		budgets, _ := dig(t, np, "spec", "disruption", "budgets").([]any)
		for _, b := range budgets {
			reasons, _ := dig(t, b, "reasons").([]any)
			for _, r := range reasons {
				if r == "Drifted" {
					drifted, _ = dig(t, b, "nodes").(string)
				}
			}
		}
		if drifted != "1" {
			t.Errorf("%s: a drift may disrupt %q nodes at once, want 1", name, drifted)
		}
		spelt, _ := dig(t, np, "spec", "template", "spec", "terminationGracePeriod").(string)
		tgp, err := time.ParseDuration(spelt)
		if err != nil {
			t.Errorf("%s: terminationGracePeriod: %v", name, err)
			continue
		}
		for _, g := range podGraces {
			if time.Duration(g)*time.Second >= tgp {
				t.Errorf("%s: terminationGracePeriod %s does not exceed a model pod's grace of %d s: Karpenter would delete the pod without its drain", name, tgp, g)
			}
		}
	}
}
