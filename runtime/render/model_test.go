package render

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// deploymentOf is the example platform's model i as a ModelDeployment.
// testEngineImage is an engine image as a deployment must name it: by
// digest, from the account's ECR.
const testEngineImage = "123456789012.dkr.ecr.eu-central-1.amazonaws.com/inference/vllm-openai@sha256:" +
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func deploymentOf(p Platform, i int) ModelDeployment {
	m := p.Models[i]
	ws := p.Plan.Workloads[workloadOf(p, m.Name)]
	return ModelDeployment{Name: m.Name, Revision: m.Revision, Namespace: p.Namespace,
		EngineImage: p.Images.Engine, PlatformImage: p.Images.Platform,
		Bucket: p.ModelCache.Bucket, Region: p.ModelCache.Region, PrometheusURL: p.PrometheusURL,
		NodePool: "gpu-" + p.GPUPool.GPU, Spot: m.Spot, Warm: m.Warm,
		MinReplicas: ws.MinReplicas, MaxReplicas: ws.MaxReplicas, DrainSeconds: p.DrainSeconds, Workload: ws}
}

// TestRenderModelIsRendersModel: a model rendered on its own (the
// provider's way) is byte for byte the file `llmplat render` writes for it.
func TestRenderModelIsRendersModel(t *testing.T) {
	p := example(t)
	files, err := Render(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range p.Models {
		got, err := RenderModel(deploymentOf(p, i))
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		var want []byte
		for _, f := range files {
			if f.Name == "model-"+m.Name+".yaml" {
				want = f.Data
			}
		}
		if want == nil || !bytes.Equal(got.Data, want) {
			t.Errorf("%s: RenderModel differs from Render's model-%s.yaml", m.Name, m.Name)
		}
		if got.Flags.MaxNumSeqs <= 0 || got.KVCapacityTokens <= 0 {
			t.Errorf("%s: flags %+v, KV tokens %d; want the planner's", m.Name, got.Flags, got.KVCapacityTokens)
		}
	}
}

// TestRenderModelOverrides: a served name and --max-num-seqs given replace
// the planner's; what cannot be rendered is refused naming its field.
func TestRenderModelOverrides(t *testing.T) {
	d := deploymentOf(example(t), 0)
	d.ServedName, d.MaxNumSeqs = "team-llama", 7
	got, err := RenderModel(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--served-model-name=team-llama", "--max-num-seqs=7", "served=team-llama,max-num-seqs=7"} {
		if !strings.Contains(string(got.Data), want) {
			t.Errorf("rendered model lacks %q", want)
		}
	}
	tests := []struct {
		name  string
		edit  func(*ModelDeployment)
		field string
	}{
		{"no revision", func(d *ModelDeployment) { d.Revision = "" }, "revision: required"},
		{"engine by tag", func(d *ModelDeployment) { d.EngineImage = "vllm/vllm-openai:v0.10.1" }, "engine_image"},
		{"bad namespace", func(d *ModelDeployment) { d.Namespace = "LLM" }, "namespace"},
		{"line break", func(d *ModelDeployment) { d.Revision = "a\nkind: Secret" }, "revision"},
		{"comma in served name", func(d *ModelDeployment) { d.ServedName = "a,kv-tokens=1" }, "served_name"},
		{"floor above cap", func(d *ModelDeployment) { d.MinReplicas = 9 }, "min_replicas"},
		{"no cap", func(d *ModelDeployment) { d.MaxReplicas = 0 }, "max_replicas"},
		{"half a window", func(d *ModelDeployment) { d.Warm = &Warm{Start: "0 8 * * *"} }, "warm"},
		{"unknown gpu", func(d *ModelDeployment) { d.Workload.GPU = "Z80" }, "workload"},
		{"does not fit", func(d *ModelDeployment) { d.Workload.Model, d.Workload.TensorParallelSize = "llama-70b", 1 }, "workload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := deploymentOf(example(t), 0)
			tt.edit(&d)
			_, err := RenderModel(d)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("RenderModel = %v, want ErrInvalid naming %s", err, tt.field)
			}
		})
	}
}
