package provider

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/render"
)

// TestAccDataSources: the capacity plan in HCL equals the planner's
// answer; a team is found by name with its balance; the declared models
// are listed; an unknown GPU profile is an error naming it.
func TestAccDataSources(t *testing.T) {
	p := startPlatform(t)
	in, err := capacity.File{Workloads: []capacity.WorkloadSpec{{Model: "llama-8b", GPU: "L40S", TensorParallelSize: 1,
		PeakStreams: 140, PlannedStreamsPerReplica: 32, MinReplicas: 2, MaxReplicas: 8}}}.Input()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := capacity.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	want := plan.Models[0]
	config := p.providerBlock() + `
data "llmplat_capacity_plan" "small" {
  model                       = "llama-8b"
  gpu                         = "L40S"
  tensor_parallel_size        = 1
  peak_streams                = 140
  planned_streams_per_replica = 32
  min_replicas                = 2
  max_replicas                = 8
}
resource "llmplat_team" "t" {
  name = "lookup"
}
resource "llmplat_credit" "c" {
  team_id             = llmplat_team.t.id
  amount_microcredits = 3000000
}
data "llmplat_team" "t" {
  name       = llmplat_team.t.name
  depends_on = [llmplat_credit.c]
}
data "llmplat_models" "all" {}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{
				Config: config,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("data.llmplat_capacity_plan.small", "max_num_seqs", strconv.FormatInt(want.Flags.MaxNumSeqs, 10)),
					resource.TestCheckResourceAttr("data.llmplat_capacity_plan.small", "max_model_len", strconv.FormatInt(want.Flags.MaxModelLen, 10)),
					resource.TestCheckResourceAttr("data.llmplat_capacity_plan.small", "kv_cache_tokens", strconv.FormatInt(want.Memory.KVCapacityTokensPerReplica, 10)),
					resource.TestCheckResourceAttr("data.llmplat_capacity_plan.small", "replicas", strconv.Itoa(want.Replicas.Replicas)),
					resource.TestCheckResourceAttr("data.llmplat_capacity_plan.small", "served_name", want.ServedName),
					resource.TestCheckResourceAttr("data.llmplat_capacity_plan.small", "weights", capacity.Llama8B.Weights),
					resource.TestCheckResourceAttr("data.llmplat_capacity_plan.small", "quantization", "bf16"),
					resource.TestCheckResourceAttr("data.llmplat_capacity_plan.small", "instance_type", "g6e.xlarge"),
					resource.TestCheckResourceAttr("data.llmplat_capacity_plan.small", "quota_vcpus", "32"), // 8 × 4
					resource.TestCheckResourceAttr("data.llmplat_capacity_plan.small", "node_gpus", "8"),
					resource.TestCheckResourceAttr("data.llmplat_team.t", "balance_microcredits", "3000000"),
					resource.TestCheckResourceAttrPair("data.llmplat_team.t", "id", "llmplat_team.t", "id"),
					resource.TestCheckResourceAttr("data.llmplat_models.all", "names.#", "1"),
					resource.TestCheckResourceAttr("data.llmplat_models.all", "names.0", testModel),
					resource.TestCheckResourceAttr("data.llmplat_models.all", "models.0.max_context_tokens", "8192"),
				),
			},
			{
				Config: p.providerBlock() + `
data "llmplat_capacity_plan" "bad" {
  model = "llama-8b"
  gpu   = "H900"
}
`,
				ExpectError: regexp.MustCompile(`(?s)No capacity plan.*H900`),
			},
		},
	})
}

// TestAccPlatformManifests: llmplat_platform_manifests renders what
// `llmplat render` writes for the platform (every object but the models',
// unless asked), each as JSON; a bad description fails at plan naming the
// field.
func TestAccPlatformManifests(t *testing.T) {
	requireTerraform(t)
	example, err := os.ReadFile(filepath.Join("..", "examples", "platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := render.Parse(example)
	if err != nil {
		t.Fatal(err)
	}
	files, err := render.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	var all, models int
	for _, f := range files {
		objs, err := decodeObjects(f.Data)
		if err != nil {
			t.Fatal(err)
		}
		all += len(objs)
		if strings.HasPrefix(f.Name, "model-") {
			models += len(objs)
		}
	}
	config := func(description string, includeModels bool) string {
		return fmt.Sprintf(`
provider "llmplat" {
  endpoint = "http://127.0.0.1:1"
  token    = "unused"
}

data "llmplat_platform_manifests" "p" {
  description    = <<-EOT
%s
EOT
  include_models = %t
}
`, description, includeModels)
	}
	pool := "data.llmplat_platform_manifests.p"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{
				Config: config(string(example), false),
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr(pool, "manifests.%", strconv.Itoa(all-models)),
					resource.TestCheckResourceAttrWith(pool, "manifests.karpenter.yaml/NodePool//gpu-l40s-spot", func(v string) error {
						var np map[string]any
						if err := json.Unmarshal([]byte(v), &np); err != nil {
							return err
						}
						limits, _ := np["spec"].(map[string]any)["limits"].(map[string]any)
						// The 8B above its on-demand floor: (8 − 2) × 1 GPU.
						if limits["nvidia.com/gpu"] != float64(6) {
							return fmt.Errorf("spot pool limits %v, want nvidia.com/gpu 6 (what the example's spot model may run there)", limits)
						}
						return nil
					}),
					resource.TestCheckNoResourceAttr(pool, "manifests.model-llama-8b.yaml/Deployment/llmplat/vllm-llama-8b"),
				),
			},
			{
				Config: config(string(example), true),
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr(pool, "manifests.%", strconv.Itoa(all)),
					resource.TestCheckResourceAttrSet(pool, "manifests.model-llama-8b.yaml/Deployment/llmplat/vllm-llama-8b"),
				),
			},
			{
				Config:      config(strings.Replace(string(example), "gpu_limit: 40", "gpu_limit: 0", 1), false),
				ExpectError: regexp.MustCompile(`gpu_pool.gpu_limit: must be positive`),
			},
		},
	})
}
