package eksllm_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// crdCharts are the releases that install CRDs only (no pod to place).
var crdCharts = map[string]bool{"karpenter_crd": true, "prometheus_operator_crds": true}

// TestCRDsComeFromCRDCharts: Helm installs a chart's crds/ folder once and
// never upgrades it (issue 30), so Karpenter's and the Prometheus
// Operator's CRDs come from their CRD charts, which Helm upgrades: each
// main chart skips its own crds/ (and kube-prometheus-stack its CRD
// subchart), waits for its CRD chart, and Karpenter's CRDs are pinned to
// the controller's version.
func TestCRDsComeFromCRDCharts(t *testing.T) {
	addons := load(t, "cluster-addons")
	for _, c := range []struct{ main, crds, version string }{
		{"karpenter", "karpenter_crd", "var.cluster.karpenter.version"},
		{"kube_prometheus_stack", "prometheus_operator_crds", "var.chart_versions.prometheus_operator_crds"},
	} {
		main := addons.block(t, "resource", "helm_release", c.main)
		if skip, ok := main.Body.Attributes["skip_crds"]; !ok || !literal(t, skip.Expr).True() {
			t.Errorf("helm_release.%s does not skip its chart's crds/: they would be installed once and never upgraded", c.main)
		}
		if got := refs(attr(t, main, "depends_on")); !slices.Contains(got, "helm_release."+c.crds) {
			t.Errorf("helm_release.%s depends on %v, not on helm_release.%s (CRDs first)", c.main, got, c.crds)
		}
		crds := addons.block(t, "resource", "helm_release", c.crds)
		if got := refs(attr(t, crds, "version")); !slices.Equal(got, []string{c.version}) {
			t.Errorf("helm_release.%s version %v, want %s", c.crds, got, c.version)
		}
	}
	stack := string(attr(t, addons.block(t, "resource", "helm_release", "kube_prometheus_stack"), "values").Range().SliceBytes(mustRead(t, filepath.Join("cluster-addons", "charts.tf"))))
	if !strings.Contains(stack, "crds = { enabled = false }") {
		t.Error("kube-prometheus-stack's CRD subchart is not disabled (crds = { enabled = false })")
	}
}
