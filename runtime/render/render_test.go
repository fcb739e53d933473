package render

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/clusterwatch"
	"github.com/llmplat/llmplat/runtime/golden"
	"github.com/llmplat/llmplat/runtime/k8sschema"
)

func example(t *testing.T) Platform {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// docs splits a rendered file into its YAML documents, each decoded.
func docs(t *testing.T, f File) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(f.Data))
	var out []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: not YAML: %v", f.Name, err)
		}
		out = append(out, d)
	}
}

// TestRenderExample: examples/platform.yaml renders the reference workload's deployment;
// the files match their golden copies, and every document is YAML with an
// apiVersion, a kind and a name.
func TestRenderExample(t *testing.T) {
	files, err := Render(example(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	kinds := map[string]int{}
	for _, f := range files {
		names = append(names, f.Name)
		golden.Check(t, filepath.Join("example", f.Name), f.Data)
		for _, d := range docs(t, f) {
			md, _ := d["metadata"].(map[string]any)
			if d["apiVersion"] == nil || d["kind"] == nil || md == nil || md["name"] == nil {
				t.Errorf("%s: a document without apiVersion, kind or name: %v", f.Name, d)
			}
			kinds[d["kind"].(string)]++
		}
	}
	if got := strings.Join(names, " "); got != "platform.yaml karpenter.yaml gpu.yaml observability.yaml model-llama-8b.yaml model-qwen-32b.yaml model-llama-70b.yaml" {
		t.Errorf("files %s", got)
	}
	want := map[string]int{"Namespace": 1, "ServiceAccount": 3, "Role": 1, "RoleBinding": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Deployment": 6, "Service": 5, "PodDisruptionBudget": 5, "ScaledObject": 3,
		"NodePool": 2, "EC2NodeClass": 1, "DaemonSet": 2, "ServiceMonitor": 1, "PodMonitor": 1, "PrometheusRule": 1, "ConfigMap": 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %s, want %d", kinds[k], k, n)
		}
	}
}

// modelDoc returns the first document of kind in model-<name>.yaml.
func modelDoc(t *testing.T, files []File, name, kind string) map[string]any {
	t.Helper()
	return modelDocs(t, files, name, kind)[0]
}

// modelDocs returns every document of kind in model-<name>.yaml, at
// least one.
func modelDocs(t *testing.T, files []File, name, kind string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, f := range files {
		if f.Name != "model-"+name+".yaml" {
			continue
		}
		for _, d := range docs(t, f) {
			if d["kind"] == kind {
				out = append(out, d)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s for %s", kind, name)
	}
	return out
}

// dig walks a decoded document.
func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v is not an object at %q", v, k)
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				t.Fatalf("%v has no item %d", v, k)
			}
			v = s[k]
		}
	}
	return v
}

// renderedExample renders the example platform and plans it as Render
// does, for tests that hold the manifests against the planner's figures.
func renderedExample(t *testing.T) ([]File, capacity.Result) {
	t.Helper()
	p := example(t)
	files, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	in, err := p.Plan.Input()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := capacity.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	return files, plan
}

// TestEngineFlagsAreThePlanners: the 8B Deployment's --max-num-seqs and
// --max-model-len are what the capacity planner computes for its profile.
func TestEngineFlagsAreThePlanners(t *testing.T) {
	files, plan := renderedExample(t)
	for _, mp := range plan.Models {
		d := modelDoc(t, files, mp.Model, "Deployment")
		args := dig(t, d, "spec", "template", "spec", "containers", 0, "args").([]any)
		joined := ""
		for _, a := range args {
			joined += a.(string) + " "
		}
		// The Service tells the orchestrators' controller the same limits,
		// in the syntax it reads.
		svc := modelDoc(t, files, mp.Model, "Service")
		spec, _ := dig(t, svc, "metadata", "annotations").(map[string]any)[clusterwatch.ModelSpecAnnotation].(string)
		m, _, err := clusterwatch.ParseModelSpec(spec)
		if err != nil {
			t.Errorf("%s: Service annotation %s: %v", mp.Model, clusterwatch.ModelSpecAnnotation, err)
		} else if m.Name != mp.Model || m.ServedName != mp.ServedName || int64(m.MaxNumSeqs) != int64(mp.Flags.MaxNumSeqs) ||
			int64(m.MaxModelLen) != int64(mp.Flags.MaxModelLen) || m.KVCapacityTokens != mp.Memory.KVCapacityTokensPerReplica {
			t.Errorf("%s: Service announces %+v, the planner %+v / %d KV tokens", mp.Model, m, mp.Flags, mp.Memory.KVCapacityTokensPerReplica)
		}
		if dig(t, svc, "metadata", "labels").(map[string]any)[clusterwatch.ModelLabel] != mp.Model {
			t.Errorf("%s: Service lacks the %s label", mp.Model, clusterwatch.ModelLabel)
		}
		for _, want := range []string{
			"--max-num-seqs=" + itoa(mp.Flags.MaxNumSeqs), "--max-model-len=" + itoa(mp.Flags.MaxModelLen),
			"--tensor-parallel-size=" + itoa(int64(mp.Flags.TensorParallelSize)), "--served-model-name=" + mp.ServedName,
		} {
			if !strings.Contains(joined, want+" ") {
				t.Errorf("%s: engine args %q lack %s", mp.Model, joined, want)
			}
		}
	}
}

// TestScaling: the 70B scales to zero and wakes on the orchestrators'
// pending-requests gauge (which exists at zero replicas), with a warm
// replica in office hours; the 8B keeps its floor of 2.
func TestScaling(t *testing.T) {
	files, err := Render(example(t))
	if err != nil {
		t.Fatal(err)
	}
	big := modelDoc(t, files, "llama-70b", "ScaledObject")
	if dig(t, big, "spec", "minReplicaCount") != 0 || dig(t, big, "spec", "maxReplicaCount") != 3 {
		t.Errorf("70B bounds %v..%v, want 0..3", dig(t, big, "spec", "minReplicaCount"), dig(t, big, "spec", "maxReplicaCount"))
	}
	var wakes, warm bool
	for _, tr := range dig(t, big, "spec", "triggers").([]any) {
		md, _ := dig(t, tr, "metadata").(map[string]any)
		if q, _ := md["query"].(string); strings.HasPrefix(q, "avg(vllm:kv_cache_usage_perc") && dig(t, tr, "metricType") != "Value" {
			t.Errorf("KV trigger %v: a fraction averaged over replicas needs metricType Value", tr)
		}
		if q, _ := md["query"].(string); strings.Contains(q, `llmplat_model_pending_requests{model="llama-70b"}`) && md["activationThreshold"] != nil {
			wakes = true
		}
		if dig(t, tr, "type") == "cron" && md["desiredReplicas"] == "1" {
			warm = true
		}
	}
	if !wakes || !warm {
		t.Errorf("70B triggers: wakes on pending %v, warm in office hours %v; want both", wakes, warm)
	}
	// The 8B's floor of 2 is its on-demand Deployment's; KEDA scales the
	// rest (TestOnDemandFloorSurvivesReclaim).
	small := modelDoc(t, files, "llama-8b", "ScaledObject")
	if dig(t, small, "spec", "minReplicaCount") != 0 || dig(t, small, "spec", "maxReplicaCount") != 6 {
		t.Errorf("8B bounds %v..%v, want 0..6 above its floor of 2", dig(t, small, "spec", "minReplicaCount"), dig(t, small, "spec", "maxReplicaCount"))
	}
	spot := dig(t, modelDoc(t, files, "llama-8b", "Deployment"), "spec", "template", "spec", "affinity", "nodeAffinity",
		"requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", 0, "matchExpressions", 0, "values").([]any)
	onDemand := dig(t, modelDoc(t, files, "qwen-32b", "Deployment"), "spec", "template", "spec", "affinity", "nodeAffinity",
		"requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", 0, "matchExpressions", 0, "values").([]any)
	if len(spot) != 2 || len(onDemand) != 1 || onDemand[0] != "gpu-l40s" {
		t.Errorf("pools: 8B %v, 32B %v; want the 8B on both pools, the 32B on demand only", spot, onDemand)
	}
}

// TestInvalidDescriptions: what cannot be rendered is refused with the
// field named.
func TestInvalidDescriptions(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Platform)
		field string
	}{
		{"unknown gpu", func(p *Platform) { p.Plan.Workloads[0].GPU = "Z80" }, "plan.workloads[0].gpu"},
		{"negative floor", func(p *Platform) { p.Plan.Workloads[1].MinReplicas = -1 }, "plan.workloads[1].min_replicas"},
		{"floor above cap", func(p *Platform) { p.Plan.Workloads[2].MinReplicas = 9 }, "plan.workloads[2].min_replicas"},
		{"model without workload", func(p *Platform) { p.Models[0].Name = "mistral-7b" }, "models[0].name"},
		{"bad namespace", func(p *Platform) { p.Namespace = "LLM Plat" }, "namespace"},
		{"no revision", func(p *Platform) { p.Models[1].Revision = "" }, "models[1].revision"},
		{"does not fit", func(p *Platform) { p.Plan.Workloads[2].TensorParallelSize = 1 }, "plan.workloads[2]: llama-70b on 1 × L40S: model does not fit"},
		{"engine by tag", func(p *Platform) { p.Images.Engine = "vllm/vllm-openai:v0.10.1" }, "images.engine"},
		{"engine by a short digest", func(p *Platform) { p.Images.Engine = "vllm/vllm-openai@sha256:0123abcd" }, "images.engine"},
		{"engine by tag and a digest in the tag", func(p *Platform) { p.Images.Engine = "vllm/vllm-openai:sha256-" + strings.Repeat("0", 64) }, "images.engine"},
		{"latest AMI", func(p *Platform) { p.GPUPool.AMIAlias = "al2023@latest" }, "gpu_pool.ami_alias"},
		{"drain past the node's grace", func(p *Platform) { p.DrainSeconds = 3600 }, "drain_seconds"},
		{"proxy source not a CIDR", func(p *Platform) { p.Gateway.ProxyProtocolFrom = []string{"lb.example.com"} }, "gateway.proxy_protocol_from"},
		{"proxy source trusting everyone", func(p *Platform) { p.Gateway.ProxyProtocolFrom = []string{"0.0.0.0/0"} }, "gateway.proxy_protocol_from"},
		{"proxy sources in one string", func(p *Platform) { p.Gateway.ProxyProtocolFrom = []string{"10.0.0.0/8,10.1.0.0/16"} }, "gateway.proxy_protocol_from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := example(t)
			tt.edit(&p)
			_, err := Render(p)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("Render = %v, want ErrInvalid naming %s", err, tt.field)
			}
		})
	}
}

// TestParseIsStrict: a misspelt key, a key given twice (at any depth), a
// value of the wrong type and a second document are refused, naming what
// is wrong.
func TestParseIsStrict(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"misspelt key", "namespace: a\nnamspace: b\n", "namspace"},
		{"duplicate key", "namespace: a\nnamespace: b\n", `namespace (line 2): mapping key "namespace" already defined`},
		{"nested duplicate", "gpu_pool:\n  gpu: l40s\n  gpu: a10g\n", `gpu_pool.gpu (line 3): mapping key "gpu" already defined`},
		{"unknown nested key", "plan:\n  workloads:\n    - {model: a, gpus: L40S}\n", "plan.workloads[0] (line 3): field gpus not found"},
		{"wrong type", "cluster: c\ngateway:\n  replicas: three\n", "gateway.replicas (line 3): cannot unmarshal"},
		{"second document", "namespace: a\n---\nnamespace: b\n", "one YAML document"},
		{"empty", "", "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v, want ErrInvalid with %q", err, tt.want)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestManifestsMatchTheirSchemas: every rendered document passes strict
// validation against its real schema: Kubernetes' OpenAPI v3 for built-in
// kinds, KEDA's and Karpenter's CRDs for theirs (k8sschema).
func TestManifestsMatchTheirSchemas(t *testing.T) {
	v, err := k8sschema.Load()
	if err != nil {
		t.Fatal(err)
	}
	files, err := Render(example(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		for _, d := range docs(t, f) {
			n++
			if errs := v.Validate(d); len(errs) > 0 {
				t.Errorf("%s: %s %v:\n  %s", f.Name, d["kind"], dig(t, d, "metadata", "name"), strings.Join(errs, "\n  "))
			}
		}
	}
	if n != 36 {
		t.Errorf("validated %d documents, want 36", n)
	}
}
