package eksllm_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmplat/llmplat/runtime/kubetest"
)

// lbControllerCRDs is the copy of the load balancer controller chart's
// crds/ folder at the pinned chart version, as charts.tf reads it.
func lbControllerCRDs(t *testing.T, addons module) string {
	t.Helper()
	return filepath.Join("cluster-addons", "crds", "aws-load-balancer-controller-"+chartVersions(t, addons)["aws_load_balancer_controller"]+".yaml")
}

// TestLBControllerCRDsUpgradeWithTheChart: the AWS Load Balancer
// Controller's chart has its TargetGroupBinding CRD in crds/, which Helm
// installs once and never upgrades (issue 43, item 7). So the chart skips
// its crds/, which are applied as manifests from a copy named for the
// pinned chart version (a bump without its CRDs finds no file), before
// the chart.
func TestLBControllerCRDsUpgradeWithTheChart(t *testing.T) {
	addons := load(t, "cluster-addons")
	chart := addons.block(t, "resource", "helm_release", "aws_load_balancer_controller")
	if skip, ok := chart.Body.Attributes["skip_crds"]; !ok || !literal(t, skip.Expr).True() {
		t.Error("helm_release.aws_load_balancer_controller does not skip its chart's crds/: Helm would install them once and never upgrade them")
	}
	if got := refs(attr(t, chart, "depends_on")); !slices.Contains(got, "kubernetes_manifest.lb_controller_crd") {
		t.Errorf("helm_release.aws_load_balancer_controller depends on %v, not on kubernetes_manifest.lb_controller_crd (CRDs first)", got)
	}
	crd := addons.block(t, "resource", "kubernetes_manifest", "lb_controller_crd")
	if got := refs(attr(t, crd, "for_each")); !slices.Equal(got, []string{"local.lb_controller_crds"}) {
		t.Errorf("kubernetes_manifest.lb_controller_crd for_each %v, want local.lb_controller_crds", got)
	}
	if got := refs(addons.locals()["lb_controller_crd_docs"]); !slices.Equal(got, []string{"path.module", "var.chart_versions.aws_load_balancer_controller"}) {
		t.Errorf("local.lb_controller_crd_docs reads %v, want the copy named for var.chart_versions.aws_load_balancer_controller", got)
	}
	data, err := os.ReadFile(lbControllerCRDs(t, addons))
	if err != nil {
		t.Fatalf("the pinned chart's CRDs are not copied: %v", err)
	}
	objs, err := kubetest.Objects(data)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			t.Errorf("%s %s in the CRD copy", o.GetKind(), o.GetName())
		}
		names = append(names, o.GetName())
	}
	if want := []string{"ingressclassparams.elbv2.k8s.aws", "targetgroupbindings.elbv2.k8s.aws"}; !slices.Equal(names, want) {
		t.Errorf("the CRD copy holds %v, want %v", names, want)
	}
}

// TestTargetGroupBindingsAdmittedByTheirCRD: a server-side dry run of the
// TargetGroupBindings the in-cluster layer applies, evaluated from its HCL,
// against an API server serving the copied CRDs: the copy installs, and
// the version it serves admits the module's objects.
func TestTargetGroupBindingsAdmittedByTheirCRD(t *testing.T) {
	addons := load(t, "cluster-addons")
	env := kubetest.Start(t, lbControllerCRDs(t, addons))
	gateway := cty.ObjectVal(map[string]cty.Value{
		"target_group_arn":       cty.StringVal("arn:aws:elasticloadbalancing:eu-central-1:123456789012:targetgroup/inference-gateway/0123456789abcdef"),
		"nodes_target_group_arn": cty.StringVal("arn:aws:elasticloadbalancing:eu-central-1:123456789012:targetgroup/inference-nodes/0123456789abcdef"),
	})
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{
		"var": cty.ObjectVal(map[string]cty.Value{"cluster": cty.ObjectVal(map[string]cty.Value{"gateway": gateway})}),
	}}
	bindings, diags := addons.locals()["target_group_bindings"].Value(ctx)
	if diags.HasErrors() {
		t.Fatalf("local.target_group_bindings: %v", diags)
	}
	manifest := attr(t, addons.block(t, "resource", "kubernetes_manifest", "target_group_binding"), "manifest")
	var objs []*unstructured.Unstructured
	for name, b := range bindings.AsValueMap() {
		v, diags := manifest.Value(&hcl.EvalContext{Variables: map[string]cty.Value{
			"each":  cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(name), "value": b}),
			"local": cty.ObjectVal(map[string]cty.Value{"namespace": cty.StringVal(kubetest.Namespace)}),
		}})
		if diags.HasErrors() {
			t.Fatalf("kubernetes_manifest.target_group_binding[%q]: %v", name, diags)
		}
		objs = append(objs, unstructuredOf(t, v))
	}
	if len(objs) != 2 {
		t.Fatalf("%d TargetGroupBindings, want the gateway's and the orchestrators'", len(objs))
	}
	for i, err := range env.DryRun(t, objs) {
		if err != nil {
			t.Errorf("TargetGroupBinding %s refused: %v", objs[i].GetName(), err)
		}
	}
}

// unstructuredOf turns an evaluated manifest into the object it describes.
func unstructuredOf(t *testing.T, v cty.Value) *unstructured.Unstructured {
	t.Helper()
	data, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		t.Fatal(err)
	}
	o := &unstructured.Unstructured{}
	if err := o.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return o
}
