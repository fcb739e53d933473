// Package eksllm_test checks what terraform cannot check offline: the
// in-cluster layer (cluster-addons/) and examples/eks use the helm and
// kubernetes providers, which cannot be installed here, so their HCL is
// parsed and its invariants asserted; and the GPU NodePools the platform
// applies are rendered from the module's settings and the example's models
// and checked. The AWS layer itself is checked by terraform (make tfcheck).
package eksllm_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"gopkg.in/yaml.v3"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/k8sschema"
	"github.com/llmplat/llmplat/runtime/render"
)

// module is one folder's Terraform files, parsed.
type module struct {
	dir    string
	bodies []*hclsyntax.Body
}

func load(t *testing.T, dir string) module {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no Terraform files (%v)", dir, err)
	}
	m := module{dir: dir}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, diags := hclsyntax.ParseConfig(src, f, hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", f, diags)
		}
		m.bodies = append(m.bodies, file.Body.(*hclsyntax.Body))
	}
	return m
}

// blocks returns the blocks of a type, with their labels.
func (m module) blocks(typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, b := range m.bodies {
		for _, bl := range b.Blocks {
			if bl.Type == typ {
				out = append(out, bl)
			}
		}
	}
	return out
}

// block returns the block of a type with labels, or fails.
func (m module) block(t *testing.T, typ string, labels ...string) *hclsyntax.Block {
	t.Helper()
	for _, bl := range m.blocks(typ) {
		if slices.Equal(bl.Labels, labels) {
			return bl
		}
	}
	t.Fatalf("%s: no %s %v", m.dir, typ, labels)
	return nil
}

// names lists the blocks' first labels (variables, outputs, modules).
func (m module) names(typ string) []string {
	var out []string
	for _, bl := range m.blocks(typ) {
		out = append(out, bl.Labels[0])
	}
	return out
}

// locals lists every local value's name and expression.
func (m module) locals() map[string]hclsyntax.Expression {
	out := map[string]hclsyntax.Expression{}
	for _, bl := range m.blocks("locals") {
		for name, a := range bl.Body.Attributes {
			out[name] = a.Expr
		}
	}
	return out
}

func attr(t *testing.T, bl *hclsyntax.Block, name string) hclsyntax.Expression {
	t.Helper()
	a, ok := bl.Body.Attributes[name]
	if !ok {
		t.Fatalf("%s %v has no %s", bl.Type, bl.Labels, name)
	}
	return a.Expr
}

// refs lists an expression's references as dotted paths (var.cluster.x).
func refs(e hclsyntax.Expression) []string {
	var out []string
	for _, tr := range e.Variables() {
		parts := []string{tr.RootName()}
		for _, step := range tr[1:] {
			if a, ok := step.(hcl.TraverseAttr); ok {
				parts = append(parts, a.Name)
			} else {
				break
			}
		}
		out = append(out, strings.Join(parts, "."))
	}
	return out
}

// allRefs is every reference in the module.
func (m module) allRefs() []string {
	var out []string
	for _, b := range m.bodies {
		_ = hclsyntax.VisitAll(b, func(n hclsyntax.Node) hcl.Diagnostics {
			if e, ok := n.(hclsyntax.Expression); ok {
				if _, isTraversal := e.(*hclsyntax.ScopeTraversalExpr); isTraversal {
					out = append(out, refs(e)...)
				}
			}
			return nil
		})
	}
	return out
}

// literal evaluates an expression that needs no context.
func literal(t *testing.T, e hclsyntax.Expression) cty.Value {
	t.Helper()
	v, diags := e.Value(nil)
	if diags.HasErrors() {
		t.Fatalf("not a literal: %v", diags)
	}
	return v
}

// chartVersions reads cluster-addons' pinned chart versions (the
// optional(string, "x.y.z") defaults of var.chart_versions).
func chartVersions(t *testing.T, addons module) map[string]string {
	t.Helper()
	typ := attr(t, addons.block(t, "variable", "chart_versions"), "type").(*hclsyntax.FunctionCallExpr)
	out := map[string]string{}
	for _, item := range typ.Args[0].(*hclsyntax.ObjectConsExpr).Items {
		key := literal(t, item.KeyExpr).AsString()
		opt, ok := item.ValueExpr.(*hclsyntax.FunctionCallExpr)
		if !ok || opt.Name != "optional" || len(opt.Args) != 2 {
			t.Fatalf("chart_versions.%s has no pinned default", key)
		}
		out[key] = literal(t, opt.Args[1]).AsString()
	}
	return out
}

// TestAddonsLayer: the in-cluster layer installs the charts it must, each
// pinned and on the system nodes; DCGM's exporter tolerates the GPU taint;
// Karpenter gets the AWS layer's interruption queue; the platform's objects
// come from llmplat_platform_manifests and the models from llmplat_model.
func TestAddonsLayer(t *testing.T) {
	addons := load(t, "cluster-addons")
	var releases []string
	for _, bl := range addons.blocks("resource") {
		if bl.Labels[0] == "helm_release" {
			releases = append(releases, bl.Labels[1])
		}
	}
	sort.Strings(releases)
	want := []string{"aws_load_balancer_controller", "dcgm_exporter", "karpenter", "karpenter_crd", "keda", "kube_prometheus_stack", "prometheus_operator_crds"}
	if !slices.Equal(releases, want) {
		t.Errorf("helm releases %v, want %v (the device plugin is the rendered DaemonSet)", releases, want)
	}
	versions := chartVersions(t, addons)
	// Karpenter's charts take the AWS layer's karpenter_version, which
	// that layer checks against the cluster's Kubernetes minor.
	versions["karpenter"] = literal(t, attr(t, load(t, ".").block(t, "variable", "karpenter_version"), "default")).AsString()
	semver := regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	for _, r := range releases {
		bl := addons.block(t, "resource", "helm_release", r)
		v := refs(attr(t, bl, "version"))
		if r == "karpenter" || r == "karpenter_crd" {
			if !slices.Equal(v, []string{"var.cluster.karpenter.version"}) {
				t.Errorf("helm_release.%s: version %v, want var.cluster.karpenter.version (the AWS layer's checked karpenter_version)", r, v)
			}
			v = []string{"var.chart_versions.karpenter"}
		}
		if len(v) != 1 || !strings.HasPrefix(v[0], "var.chart_versions.") {
			t.Errorf("helm_release.%s: version %v, want one of var.chart_versions", r, v)
			continue
		}
		if pin := versions[strings.TrimPrefix(v[0], "var.chart_versions.")]; !semver.MatchString(pin) {
			t.Errorf("helm_release.%s: chart version %q is not pinned to an exact version", r, pin)
		}
		if r != "dcgm_exporter" && !crdCharts[r] && !slices.Contains(refs(attr(t, bl, "values")), "local.system_nodes") {
			t.Errorf("helm_release.%s does not run on the system nodes", r)
		}
	}
	if versions["karpenter"] != strings.TrimPrefix(strings.Split(k8sschema.KarpenterModule, "@")[1], "v") {
		t.Errorf("Karpenter chart %s, but the NodePools are validated against %s", versions["karpenter"], k8sschema.KarpenterModule)
	}
	if versions["keda"] != strings.TrimPrefix(strings.Split(k8sschema.KEDAModule, "@")[1], "v") {
		t.Errorf("KEDA chart %s, but the ScaledObjects are validated against %s", versions["keda"], k8sschema.KEDAModule)
	}

	dcgm := addons.block(t, "resource", "helm_release", "dcgm_exporter")
	if !slices.Contains(refs(attr(t, dcgm, "values")), "local.gpu_toleration") {
		t.Error("the DCGM exporter does not tolerate the GPU nodes' taint")
	}
	tol := literal(t, addons.locals()["gpu_toleration"]).AsValueMap()
	if tol["key"].AsString() != "nvidia.com/gpu" || tol["effect"].AsString() != "NoSchedule" || tol["operator"].AsString() != "Exists" {
		t.Errorf("the GPU toleration %v does not match the taint nvidia.com/gpu=present:NoSchedule", tol)
	}
	karpenter := refs(attr(t, addons.block(t, "resource", "helm_release", "karpenter"), "values"))
	for _, want := range []string{"var.cluster.cluster_name", "var.cluster.karpenter.interruption_queue"} {
		if !slices.Contains(karpenter, want) {
			t.Errorf("Karpenter's values do not use %s", want)
		}
	}

	platform := addons.block(t, "resource", "kubernetes_manifest", "platform")
	if got := refs(attr(t, platform, "for_each")); !slices.Equal(got, []string{"local.manifests"}) {
		t.Errorf("kubernetes_manifest.platform for_each %v, want local.manifests", got)
	}
	if got := refs(addons.locals()["manifests"]); !slices.Contains(got, "data.llmplat_platform_manifests.platform.manifests") {
		t.Errorf("local.manifests %v does not come from llmplat_platform_manifests", got)
	}
	model := addons.block(t, "resource", "llmplat_model", "this")
	if got := refs(attr(t, model, "for_each")); !slices.Equal(got, []string{"var.models"}) {
		t.Errorf("llmplat_model for_each %v, want var.models", got)
	}
	dep := attr(t, model, "deployment").(*hclsyntax.ObjectConsExpr)
	var spot []string
	for _, item := range dep.Items {
		if literal(t, item.KeyExpr).AsString() == "spot" {
			spot = refs(item.ValueExpr)
		}
	}
	if !slices.Equal(spot, []string{"each.value.spot"}) {
		t.Errorf("a model's spot is %v, want each.value.spot (per model)", spot)
	}
	bindings := refs(addons.locals()["target_group_bindings"])
	for _, want := range []string{"var.cluster.gateway.target_group_arn", "var.cluster.gateway.nodes_target_group_arn"} {
		if !slices.Contains(bindings, want) {
			t.Errorf("no TargetGroupBinding fills %s", want)
		}
	}
}

// TestReferencesResolve: every variable and local a layer uses is declared,
// every output of the AWS layer the others read exists, and the example
// gives each layer every variable it requires.
func TestReferencesResolve(t *testing.T) {
	aws := load(t, ".")
	addons := load(t, "cluster-addons")
	example := load(t, filepath.Join("..", "..", "examples", "eks"))
	outputs := aws.names("output")
	clusterType := attr(t, addons.block(t, "variable", "cluster"), "type").(*hclsyntax.FunctionCallExpr)
	var clusterAttrs []string
	for _, item := range clusterType.Args[0].(*hclsyntax.ObjectConsExpr).Items {
		name := hcl.ExprAsKeyword(item.KeyExpr)
		clusterAttrs = append(clusterAttrs, name)
		if !slices.Contains(outputs, name) {
			t.Errorf("cluster-addons' var.cluster.%s is no output of the AWS layer (%v)", name, outputs)
		}
	}
	for _, m := range []module{aws, addons, example} {
		vars, locals := m.names("variable"), m.locals()
		modules := m.names("module")
		for _, r := range m.allRefs() {
			parts := strings.Split(r, ".")
			switch parts[0] {
			case "var":
				if !slices.Contains(vars, parts[1]) {
					t.Errorf("%s: %s is not declared", m.dir, r)
				}
				if m.dir == "cluster-addons" && parts[1] == "cluster" && len(parts) > 2 && !slices.Contains(clusterAttrs, parts[2]) {
					t.Errorf("%s: %s is not in var.cluster's type", m.dir, r)
				}
			case "local":
				if _, ok := locals[parts[1]]; !ok {
					t.Errorf("%s: %s is not declared", m.dir, r)
				}
			case "module":
				if !slices.Contains(modules, parts[1]) {
					t.Errorf("%s: %s is not declared", m.dir, r)
				}
				if parts[1] == "eks" && len(parts) > 2 && !slices.Contains(outputs, parts[2]) {
					t.Errorf("%s: %s is no output of the AWS layer", m.dir, r)
				}
			}
		}
	}
	for _, call := range []struct {
		name string
		mod  module
	}{{"eks", aws}, {"addons", addons}} {
		bl := example.block(t, "module", call.name)
		for _, v := range call.mod.blocks("variable") {
			_, hasDefault := v.Body.Attributes["default"]
			if _, given := bl.Body.Attributes[v.Labels[0]]; !hasDefault && !given {
				t.Errorf("examples/eks: module.%s lacks the required %s", call.name, v.Labels[0])
			}
		}
		for name := range bl.Body.Attributes {
			if name != "source" && !slices.Contains(call.mod.names("variable"), name) {
				t.Errorf("examples/eks: module.%s has no variable %s", call.name, name)
			}
		}
	}
}

// TestExampleGivesTheRunnerAWayIn: examples/eks passes every input that
// decides whether the runner reaches the cluster (its admin entry, the API
// endpoint's shapes, the gateway's reach) from a variable of its own, and
// the runner's admin entry is on by default: without them the example
// built a private API nobody could reach or administer (issue 30).
func TestExampleGivesTheRunnerAWayIn(t *testing.T) {
	example := load(t, filepath.Join("..", "..", "examples", "eks"))
	eks := example.block(t, "module", "eks")
	for _, name := range []string{"enable_cluster_creator_admin_permissions", "cluster_admin_arns",
		"public_api_endpoint_cidrs", "private_api_endpoint_cidrs", "private_api_endpoint_security_group_ids",
		"gateway_internal", "gateway_client_cidrs"} {
		a, ok := eks.Body.Attributes[name]
		if !ok {
			t.Errorf("examples/eks: module.eks does not pass %s", name)
			continue
		}
		if got := refs(a.Expr); !slices.Equal(got, []string{"var." + name}) {
			t.Errorf("examples/eks: module.eks.%s = %v, want var.%s", name, got, name)
		}
	}
	creator := literal(t, attr(t, example.block(t, "variable", "enable_cluster_creator_admin_permissions"), "default"))
	if !creator.True() {
		t.Error("examples/eks: the runner's cluster-admin entry must be on by default (steps 2 and 3 act as the runner)")
	}
}

// TestListenersWaitForTheCertificate: every TLS listener of the AWS layer
// takes its certificate from aws_acm_certificate_validation, which waits
// until ACM has issued it, and that validation exists whatever serves the
// DNS (no count): a listener given a certificate still pending validation
// fails the first apply (UnsupportedCertificate). terraform test sees the
// values, not where they come from, so the reference is checked here.
func TestListenersWaitForTheCertificate(t *testing.T) {
	aws := load(t, ".")
	validation := aws.block(t, "resource", "aws_acm_certificate_validation", "gateway")
	for _, meta := range []string{"count", "for_each"} {
		if _, ok := validation.Body.Attributes[meta]; ok {
			t.Errorf("aws_acm_certificate_validation.gateway has %s: without Route 53 nothing would wait for issuance", meta)
		}
	}
	listeners := 0
	for _, bl := range aws.blocks("resource") {
		if bl.Labels[0] != "aws_lb_listener" {
			continue
		}
		listeners++
		got := refs(attr(t, bl, "certificate_arn"))
		if !slices.Equal(got, []string{"aws_acm_certificate_validation.gateway.certificate_arn"}) {
			t.Errorf("aws_lb_listener.%s takes its certificate from %v, want aws_acm_certificate_validation.gateway.certificate_arn (it waits for issuance)", bl.Labels[1], got)
		}
	}
	if listeners != 2 {
		t.Errorf("%d TLS listeners, want 2 (the gateway's and the node socket's)", listeners)
	}
}

// TestExamplePlatformNamesWhatTheModuleCreates: examples/platform.yaml
// (what `llmplat render` users start from) names the cluster, the GPU
// nodes' role, the model bucket, namespace, region and Prometheus that
// examples/eks creates, not others (the example account 123456789012
// stands for the deploying one).
func TestExamplePlatformNamesWhatTheModuleCreates(t *testing.T) {
	aws := load(t, ".")
	addons := load(t, "cluster-addons")
	example := load(t, filepath.Join("..", "..", "examples", "eks"))
	p, err := render.ParseFile(filepath.Join("..", "..", "examples", "platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	name := literal(t, attr(t, example.block(t, "module", "eks"), "name")).AsString()
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{
		"var":   cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(name)}),
		"local": cty.ObjectVal(map[string]cty.Value{"account_id": cty.StringVal("123456789012")}),
	}}
	eval := func(e hclsyntax.Expression) string {
		t.Helper()
		v, diags := e.Value(ctx)
		if diags.HasErrors() {
			t.Fatalf("evaluate %v: %v", refs(e), diags)
		}
		return v.AsString()
	}
	bucket := aws.locals()["model_bucket"].(*hclsyntax.FunctionCallExpr) // coalesce(var.model_bucket_name, default)
	def := func(m module, v string) string {
		return literal(t, attr(t, m.block(t, "variable", v), "default")).AsString()
	}
	prometheus := ""
	for _, item := range addons.locals()["description"].(*hclsyntax.FunctionCallExpr).Args[1].(*hclsyntax.ObjectConsExpr).Items {
		if hcl.ExprAsKeyword(item.KeyExpr) == "prometheus_url" {
			prometheus = literal(t, item.ValueExpr).AsString()
		}
	}
	for _, c := range []struct{ field, got, want string }{
		{"cluster", p.Cluster, name},
		{"node_role", p.NodeRole, eval(attr(t, aws.block(t, "resource", "aws_iam_role", "karpenter_node"), "name"))},
		{"model_cache.bucket", p.ModelCache.Bucket, eval(bucket.Args[1])},
		{"model_cache.region", p.ModelCache.Region, def(example, "region")},
		{"namespace", p.Namespace, def(aws, "namespace")},
		{"prometheus_url", p.PrometheusURL, prometheus},
	} {
		if c.got != c.want {
			t.Errorf("examples/platform.yaml %s = %q, but examples/eks creates %q", c.field, c.got, c.want)
		}
	}
}

// TestKarpenterMakesItsInstanceProfile: the EC2NodeClass names the GPU
// nodes' role and Karpenter creates their instance profile (its policy
// allows it), so the AWS layer makes none: one it made would go unused.
func TestKarpenterMakesItsInstanceProfile(t *testing.T) {
	aws := load(t, ".")
	for _, bl := range aws.blocks("resource") {
		if bl.Labels[0] == "aws_iam_instance_profile" {
			t.Errorf("aws_iam_instance_profile.%s: nothing uses it (the EC2NodeClass names the role; Karpenter makes the profile)", bl.Labels[1])
		}
	}
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "templates", "karpenter.yaml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(tmpl), "role: {{ .NodeRole }}") || strings.Contains(string(tmpl), "instanceProfile") {
		t.Error("the EC2NodeClass no longer names the role alone: an instance profile would have to be made and passed")
	}
	policy := attr(t, aws.block(t, "resource", "aws_iam_role_policy", "karpenter"), "policy")
	if !strings.Contains(string(policy.Range().SliceBytes(mustRead(t, policy.Range().Filename))), "iam:CreateInstanceProfile") {
		t.Error("Karpenter's policy does not allow it to create the nodes' instance profile")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGPUPools: the NodePools the in-cluster layer applies, rendered from
// the AWS layer's defaults and the example's models as
// llmplat_platform_manifests renders them, carry the GPU taint, a limit of
// what their models may run on them (40 GPUs on demand, 6 on spot),
// consolidateAfter 10m and the g6e family only; only the 8B model may use
// the spot pool; every object matches its schema.
func TestGPUPools(t *testing.T) {
	aws := load(t, ".")
	example := load(t, filepath.Join("..", "..", "examples", "eks"))
	def := func(name string) cty.Value {
		return literal(t, attr(t, aws.block(t, "variable", name), "default"))
	}
	pool := def("gpu_pool").AsValueMap()
	limit, _ := pool["gpu_limit"].AsBigFloat().Int64()
	p := render.Platform{Cluster: def("name").AsString(), NodeRole: def("name").AsString() + "-karpenter-node",
		Namespace: def("namespace").AsString(), PrometheusURL: "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"}
	p.Images.Engine, p.Images.Platform, p.Images.DevicePlugin = "123456789012.dkr.ecr.eu-central-1.amazonaws.com/inference/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "123456789012.dkr.ecr.eu-central-1.amazonaws.com/llmplat:0.1.0", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
	p.ModelCache.Bucket, p.ModelCache.Region = "inference-models-123456789012", "eu-central-1"
	p.GPUPool.GPU, p.GPUPool.Family, p.GPUPool.GPULimit = pool["gpu"].AsString(), pool["family"].AsString(), int(limit)
	models := literal(t, example.locals()["models"]).AsValueMap()
	num := func(v cty.Value) int { n, _ := v.AsBigFloat().Int64(); return int(n) }
	names := make([]string, 0, len(models))
	for name := range models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m := models[name].AsValueMap()
		p.Plan.Workloads = append(p.Plan.Workloads, capacity.WorkloadSpec{Model: name, GPU: "L40S",
			TensorParallelSize: num(m["gpus_per_replica"]), PeakStreams: num(m["peak_streams"]),
			PlannedStreamsPerReplica: num(m["planned_streams_per_replica"]),
			MinReplicas:              num(m["min_replicas"]), MaxReplicas: num(m["max_replicas"])})
		spot := m["spot"] != cty.NilVal && m["spot"].True()
		p.Models = append(p.Models, render.Model{Name: name, Revision: m["revision"].AsString(), Spot: spot})
	}
	files, err := render.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	v, err := k8sschema.Load()
	if err != nil {
		t.Fatal(err)
	}
	nodePools := map[string]map[string]any{}
	spotUsers := []string{}
	for _, f := range files {
		dec := yaml.NewDecoder(bytes.NewReader(f.Data))
		for {
			var d map[string]any
			if err := dec.Decode(&d); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if errs := v.Validate(d); len(errs) > 0 {
				t.Errorf("%s: %s: %v", f.Name, d["kind"], errs)
			}
			name := dig(d, "metadata", "name").(string)
			switch d["kind"] {
			case "NodePool":
				nodePools[name] = d
			case "Deployment":
				if strings.HasPrefix(name, "vllm-") && strings.Contains(string(mustYAML(t, d)), "-spot") {
					spotUsers = append(spotUsers, strings.TrimPrefix(name, "vllm-"))
				}
			}
		}
	}
	if len(nodePools) != 2 || nodePools["gpu-l40s"] == nil || nodePools["gpu-l40s-spot"] == nil {
		t.Fatalf("NodePools %v, want gpu-l40s and gpu-l40s-spot", keys(nodePools))
	}
	// On demand every model at max_replicas on its smallest node (8 × 1 +
	// 5 × 4 + 3 × 4); on spot the 8B above its on-demand floor ((8 − 2) × 1).
	wantLimits := map[string]int{"gpu-l40s": 40, "gpu-l40s-spot": 6}
	for name, np := range nodePools {
		taints := dig(np, "spec", "template", "spec", "taints").([]any)
		if len(taints) != 1 || !matches(taints[0], map[string]any{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}) {
			t.Errorf("%s: taints %v, want nvidia.com/gpu=present:NoSchedule", name, taints)
		}
		if got, want := dig(np, "spec", "limits", "nvidia.com/gpu"), wantLimits[name]; got != want {
			t.Errorf("%s: limits nvidia.com/gpu %v, want %d: what its models may run on it", name, got, want)
		}
		if got := dig(np, "spec", "disruption", "consolidateAfter"); got != "10m" {
			t.Errorf("%s: consolidateAfter %v, want 10m", name, got)
		}
		var families, capacity []any
		for _, r := range dig(np, "spec", "template", "spec", "requirements").([]any) {
			switch r.(map[string]any)["key"] {
			case "karpenter.k8s.aws/instance-family":
				families = r.(map[string]any)["values"].([]any)
			case "karpenter.sh/capacity-type":
				capacity = r.(map[string]any)["values"].([]any)
			}
		}
		if len(families) != 1 || families[0] != "g6e" {
			t.Errorf("%s: instance families %v, want g6e only", name, families)
		}
		wantCapacity := "on-demand"
		if strings.HasSuffix(name, "-spot") {
			wantCapacity = "spot"
		}
		if len(capacity) != 1 || capacity[0] != wantCapacity {
			t.Errorf("%s: capacity types %v, want %s only", name, capacity, wantCapacity)
		}
	}
	if !slices.Equal(spotUsers, []string{"llama-8b"}) {
		t.Errorf("models admitted to the spot pool: %v, want the 8B only", spotUsers)
	}
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func matches(v any, want map[string]any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != len(want) {
		return false
	}
	for k, w := range want {
		if m[k] != w {
			return false
		}
	}
	return true
}

func mustYAML(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
