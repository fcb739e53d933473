package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/k8sschema"
	"github.com/llmplat/llmplat/runtime/kubetest"
	"github.com/llmplat/llmplat/runtime/render"
)

// The model's objects, as the cluster serves them.
var (
	deploymentsGVR  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	servicesGVR     = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	pdbsGVR         = schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}
	scaledObjectGVR = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}
)

// scaledToZero is the deployment's second settings: a floor of zero with
// a warm window, and a batch given instead of the planner's.
const scaledToZero = `    min_replicas     = 0
    max_num_seqs     = 24
    warm = {
      timezone = "Europe/Berlin"
      start    = "0 8 * * 1-5"
      end      = "0 19 * * 1-5"
    }
`

// deployedModel is the model TestAccModelDeployment declares.
const deployedModel = "qwen-32b"

// cluster is a real API server serving KEDA's ScaledObject, and a client.
type cluster struct {
	env        kubetest.Env
	kubeconfig string
	dyn        dynamic.Interface
}

func startCluster(t *testing.T) cluster {
	t.Helper()
	crd, err := k8sschema.ScaledObjectCRD()
	if err != nil {
		t.Fatalf("%v (make test downloads the schema modules first)", err)
	}
	env := kubetest.Start(t, crd)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cluster{env: env, kubeconfig: env.Kubeconfig(t), dyn: dyn}
}

// providerBlockFor configures the provider for p, with c's kubeconfig.
func (p *platform) providerBlockFor(c cluster) string {
	return fmt.Sprintf("provider \"llmplat\" {\n  endpoint = %q\n  token    = %q\n  kubernetes {\n    config_path = %q\n  }\n}\n",
		p.URL, p.token, c.kubeconfig)
}

func (c cluster) get(gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error) {
	return c.dyn.Resource(gvr).Namespace(c.env.Namespace).Get(context.Background(), name, metav1.GetOptions{})
}

// deploymentConfig is the model with a deployment; body adds settings.
func deploymentConfig(provider string, price, maxReplicas int, body string) string {
	return provider + fmt.Sprintf(`
resource "llmplat_model" "m" {
  name                            = %q
  served_name                     = "Qwen/Qwen2.5-32B-Instruct"
  prompt_price_micro_per_mtok     = %d
  completion_price_micro_per_mtok = 1200000
  max_context_tokens              = 8192
  max_output_tokens               = 2048
  deployment = {
    namespace        = "llmplat"
    revision         = "2024-09-19"
    s3_bucket        = "llmplat-models"
    s3_region        = "eu-central-1"
    engine_image     = "123456789012.dkr.ecr.eu-central-1.amazonaws.com/inference/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    platform_image   = "llmplat/llmplat:0.1.0"
    prometheus_url   = "http://prometheus-operated.monitoring.svc:9090"
    gpu              = "L40S"
    gpus_per_replica = 2
    max_replicas     = %d
    planned_streams_per_replica = 16
%s  }
}
`, deployedModel, price, maxReplicas, body)
}

// engineArgs is the vLLM container's arguments in the cluster.
func (c cluster) engineArgs() ([]string, error) {
	d, err := c.get(deploymentsGVR, "vllm-"+deployedModel)
	if err != nil {
		return nil, err
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		return nil, fmt.Errorf("%d containers, want the engine alone", len(containers))
	}
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	return args, nil
}

// TestAccModelDeployment: llmplat_model applies the model's objects to a
// real API server with server-side apply (the planner's flags when none
// are given), changes them in place, notices a field changed and an
// object deleted outside Terraform and puts them back, imports, and
// destroy removes the objects and the model.
func TestAccModelDeployment(t *testing.T) {
	p := startPlatform(t)
	c := startCluster(t)
	provider := p.providerBlockFor(c)
	// What the planner says of the model on two L40S.
	planned, err := render.RenderModel(render.ModelDeployment{Name: deployedModel, Revision: "r", Namespace: "n", EngineImage: "123456789012.dkr.ecr.eu-central-1.amazonaws.com/inference/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		PlatformImage: "p", Bucket: "b", Region: "r", PrometheusURL: "u", NodePool: "gpu-l40s", MaxReplicas: 4,
		Workload: capacity.WorkloadSpec{Model: deployedModel, GPU: "L40S", TensorParallelSize: 2, PlannedStreamsPerReplica: 16,
			MinReplicas: 1, MaxReplicas: 4}})
	if err != nil {
		t.Fatal(err)
	}
	name := "vllm-" + deployedModel
	var uid types.UID
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		CheckDestroy: func(*terraform.State) error {
			if _, err := p.client.GetModel(context.Background(), deployedModel); !notFound(err) {
				return fmt.Errorf("the destroyed model: %v, want not found", err)
			}
			for _, gvr := range []schema.GroupVersionResource{deploymentsGVR, servicesGVR, pdbsGVR, scaledObjectGVR} {
				if _, err := c.get(gvr, name); !apierrors.IsNotFound(err) {
					return fmt.Errorf("%s %s after destroy: %v, want not found", gvr.Resource, name, err)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: deploymentConfig(provider, 300000, 4, ""),
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr("llmplat_model.m", "deployment.max_num_seqs", itoa(planned.Flags.MaxNumSeqs)),
					resource.TestCheckResourceAttr("llmplat_model.m", "deployment.max_model_len", itoa(planned.Flags.MaxModelLen)),
					resource.TestCheckResourceAttr("llmplat_model.m", "deployment.node_pool", "gpu-l40s"),
					resource.TestCheckResourceAttr("llmplat_model.m", "kubernetes_objects.%", "4"),
					resource.TestMatchResourceAttr("llmplat_model.m", "kubernetes_objects.Deployment/llmplat/"+name, regexp.MustCompile(`^sha256:[0-9a-f]{24}$`)),
					func(*terraform.State) error {
						if _, err := p.client.GetModel(context.Background(), deployedModel); err != nil {
							return fmt.Errorf("the model is not registered: %v", err)
						}
						args, err := c.engineArgs()
						if err != nil {
							return err
						}
						for _, want := range []string{"--max-num-seqs=" + itoa(planned.Flags.MaxNumSeqs), "--tensor-parallel-size=2",
							"--served-model-name=Qwen/Qwen2.5-32B-Instruct"} {
							if !slices.Contains(args, want) {
								return fmt.Errorf("engine args %v lack %s", args, want)
							}
						}
						d, err := c.get(deploymentsGVR, name)
						if err != nil {
							return err
						}
						uid = d.GetUID()
						if !slices.ContainsFunc(d.GetManagedFields(), func(f metav1.ManagedFieldsEntry) bool {
							return f.Manager == fieldManager && f.Operation == metav1.ManagedFieldsOperationApply
						}) {
							return fmt.Errorf("the Deployment's fields are not server-side applied by %s: %+v", fieldManager, d.GetManagedFields())
						}
						for _, gvr := range []schema.GroupVersionResource{servicesGVR, pdbsGVR} {
							if _, err := c.get(gvr, name); err != nil {
								return err
							}
						}
						so, err := c.get(scaledObjectGVR, name)
						if err != nil {
							return err
						}
						if n, _, _ := unstructured.NestedInt64(so.Object, "spec", "maxReplicaCount"); n != 4 {
							return fmt.Errorf("ScaledObject maxReplicaCount %d, want 4", n)
						}
						return nil
					},
				),
			},
			{
				// In place: a new cap, a floor of zero with a warm window,
				// and a batch given instead of the planner's.
				Config: deploymentConfig(provider, 300000, 6, scaledToZero),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("llmplat_model.m", plancheck.ResourceActionUpdate)}},
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr("llmplat_model.m", "deployment.max_num_seqs", "24"),
					func(*terraform.State) error {
						d, err := c.get(deploymentsGVR, name)
						if err != nil {
							return err
						}
						if d.GetUID() != uid {
							return fmt.Errorf("the Deployment was replaced, not changed in place")
						}
						if args, _ := c.engineArgs(); !slices.Contains(args, "--max-num-seqs=24") {
							return fmt.Errorf("engine args %v, want --max-num-seqs=24", args)
						}
						so, err := c.get(scaledObjectGVR, name)
						if err != nil {
							return err
						}
						lo, _, _ := unstructured.NestedInt64(so.Object, "spec", "minReplicaCount")
						hi, _, _ := unstructured.NestedInt64(so.Object, "spec", "maxReplicaCount")
						triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
						if lo != 0 || hi != 6 || !slices.ContainsFunc(triggers, func(tr any) bool { return tr.(map[string]any)["type"] == "cron" }) {
							return fmt.Errorf("ScaledObject replicas %d..%d, triggers %v; want 0..6 with a cron trigger", lo, hi, triggers)
						}
						return nil
					},
				),
			},
			{
				// Drift: someone edits the engine's flags, deletes the PDB
				// and reprices the model; the refresh shows each, the apply
				// puts them back.
				PreConfig: func() {
					ctx := context.Background()
					d, err := c.get(deploymentsGVR, name)
					if err != nil {
						t.Fatal(err)
					}
					containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
					engine := containers[0].(map[string]any)
					args, _, _ := unstructured.NestedStringSlice(engine, "args")
					for i, a := range args {
						if strings.HasPrefix(a, "--max-num-seqs=") {
							args[i] = "--max-num-seqs=999"
						}
					}
					if err := unstructured.SetNestedStringSlice(engine, args, "args"); err != nil {
						t.Fatal(err)
					}
					if err := unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers"); err != nil {
						t.Fatal(err)
					}
					if _, err := c.dyn.Resource(deploymentsGVR).Namespace("llmplat").Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
						t.Fatal(err)
					}
					if err := c.dyn.Resource(pdbsGVR).Namespace("llmplat").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					m, err := p.client.GetModel(ctx, deployedModel)
					if err != nil {
						t.Fatal(err)
					}
					spec := adminwire.ModelSpec{ServedName: m.ServedName, PromptPriceMicroPerMTok: 1, CompletionPriceMicroPerMTok: m.CompletionPriceMicroPerMTok,
						MaxContextTokens: m.MaxContextTokens, MaxOutputTokens: m.MaxOutputTokens}
					if _, _, err := p.client.PutModel(ctx, deployedModel, spec); err != nil {
						t.Fatal(err)
					}
				},
				Config: deploymentConfig(provider, 300000, 6, scaledToZero),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("llmplat_model.m", plancheck.ResourceActionUpdate),
					refreshedAs{"llmplat_model.m", map[string]string{
						"Deployment/llmplat/" + name:          driftChanged,
						"PodDisruptionBudget/llmplat/" + name: driftAbsent,
					}, "1"},
				}},
				Check: func(*terraform.State) error {
					if args, _ := c.engineArgs(); !slices.Contains(args, "--max-num-seqs=24") {
						return fmt.Errorf("engine args %v after apply, want --max-num-seqs=24 back", args)
					}
					if _, err := c.get(pdbsGVR, name); err != nil {
						return fmt.Errorf("the deleted PDB is not back: %v", err)
					}
					if m, err := p.client.GetModel(context.Background(), deployedModel); err != nil || m.PromptPriceMicroPerMTok != 300000 {
						return fmt.Errorf("price %+v, %v; want 300000 back", m, err)
					}
					return nil
				},
			},
			{ResourceName: "llmplat_model.m", ImportState: true, ImportStateVerify: true,
				// The deployment is configuration, not something the admin
				// API keeps; the next apply adopts the objects.
				ImportStateVerifyIgnore: []string{"deployment", "kubernetes_objects"}},
		},
	})
}

// refreshedAs checks the refreshed state a plan starts from: the model's
// kubernetes_objects say what a refresh found, and its prompt price.
type refreshedAs struct {
	address string
	objects map[string]string
	price   string
}

func (r refreshedAs) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != r.address {
			continue
		}
		before, _ := rc.Change.Before.(map[string]any)
		objs, _ := before["kubernetes_objects"].(map[string]any)
		for k, want := range r.objects {
			if objs[k] != want {
				resp.Error = fmt.Errorf("refreshed kubernetes_objects[%q] = %v, want %q (all: %v)", k, objs[k], want, objs)
				return
			}
		}
		if fmt.Sprint(before["prompt_price_micro_per_mtok"]) != r.price {
			resp.Error = fmt.Errorf("refreshed price %v, want %v", before["prompt_price_micro_per_mtok"], r.price)
		}
		return
	}
	resp.Error = fmt.Errorf("no change planned for %s", r.address)
}

// TestAccModelDeploymentRefusals: a deployment that cannot work fails the
// plan, at its attribute, before anything is applied.
func TestAccModelDeploymentRefusals(t *testing.T) {
	// Planning contacts the platform only for the provider's credentials
	// check, and never the cluster.
	p := startPlatform(t)
	withKube := providerBlockAt(p.URL, p.token, "  kubernetes {\n    host  = \"https://127.0.0.1:1\"\n    token = \"k\"\n  }\n")
	noKube := p.providerBlock()
	tests := []struct {
		name, provider, body string
		price, cap           int
		want                 string
	}{
		{"no kubernetes access", noKube, "", 1, 4, `No Kubernetes access`},
		{"floor above cap", withKube, "    min_replicas = 5\n", 1, 3, `Invalid deployment.min_replicas(.|\n)*min_replicas: 5 is above max_replicas 3`},
		{"does not fit", withKube, "    profile = \"llama-70b\"\n", 1, 3, `llama-70b on 2 × L40S: planned streams do not fit`},
		{"context above the engine's", withKube, "    max_model_len = 4096\n", 1, 3, `Context longer than the engines take`},
		{"bad pool name", withKube, "    node_pool = \"GPU pool\"\n", 1, 3, `Invalid Attribute Value Match(.|\n)*deployment.node_pool must be a Kubernetes name`},
		{"zero batch", withKube, "    max_num_seqs = 0\n", 1, 3, `Invalid Attribute Value(.|\n)*deployment.max_num_seqs value must be at least 1`},
		{"fractional batch", withKube, "    max_num_seqs = 1.5\n", 1, 3, `Not a whole number(.|\n)*deployment.max_num_seqs must be a whole number; got 1.5`},
		{"drain beyond 64 bits", withKube, "    drain_seconds = 9223372036854775808\n", 1, 3, `Number out of range(.|\n)*deployment.drain_seconds must be between`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps: []resource.TestStep{{Config: deploymentConfig(tt.provider, tt.price, tt.cap, tt.body),
					PlanOnly: true, ExpectError: regexp.MustCompile(tt.want)}},
			})
		})
	}
}
