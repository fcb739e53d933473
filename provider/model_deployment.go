package provider

import (
	"context"
	"errors"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/render"
)

// deploymentModel is llmplat_model's deployment: the model's engines in
// the cluster, their flags from the capacity planner unless given.
type deploymentModel struct {
	Namespace                types.String `tfsdk:"namespace"`
	Revision                 types.String `tfsdk:"revision"`
	S3Bucket                 types.String `tfsdk:"s3_bucket"`
	S3Region                 types.String `tfsdk:"s3_region"`
	EngineImage              types.String `tfsdk:"engine_image"`
	PlatformImage            types.String `tfsdk:"platform_image"`
	PrometheusURL            types.String `tfsdk:"prometheus_url"`
	Profile                  types.String `tfsdk:"profile"`
	GPU                      types.String `tfsdk:"gpu"`
	GPUsPerReplica           types.Int64  `tfsdk:"gpus_per_replica"`
	NodePool                 types.String `tfsdk:"node_pool"`
	MinReplicas              types.Int64  `tfsdk:"min_replicas"`
	MaxReplicas              types.Int64  `tfsdk:"max_replicas"`
	Spot                     types.Bool   `tfsdk:"spot"`
	Warm                     *warmModel   `tfsdk:"warm"`
	MaxModelLen              types.Int64  `tfsdk:"max_model_len"`
	MaxNumSeqs               types.Int64  `tfsdk:"max_num_seqs"`
	PlannedStreamsPerReplica types.Int64  `tfsdk:"planned_streams_per_replica"`
	DrainSeconds             types.Int64  `tfsdk:"drain_seconds"`
	KVCacheTokens            types.Int64  `tfsdk:"kv_cache_tokens"`
}

type warmModel struct {
	Timezone types.String `tfsdk:"timezone"`
	Start    types.String `tfsdk:"start"`
	End      types.String `tfsdk:"end"`
}

// Defaults of a deployment's optional settings.
const (
	defaultGPUsPerReplica = 1
	defaultMinReplicas    = 1
	defaultDrainSeconds   = 300
)

func deploymentSchema() schema.SingleNestedAttribute {
	req := func(d string) schema.StringAttribute {
		return schema.StringAttribute{Required: true, MarkdownDescription: d}
	}
	fromPlanner := func(d string) schema.Int64Attribute {
		return schema.Int64Attribute{CustomType: wholeNumber, Optional: true, Computed: true, Validators: []validator.Int64{positive},
			MarkdownDescription: d + " Default: the capacity planner's answer for the model on its GPUs (as llmplat_capacity_plan gives it)."}
	}
	return schema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "The model's engines in the cluster: `llmplat render`'s objects for this model (vLLM Deployment with the " +
			"modelsync init container, headless Service, PodDisruptionBudget, KEDA ScaledObject), applied server-side with the " +
			"field manager " + fieldManager + ". Needs the provider's kubernetes access, the namespace with the vllm service " +
			"account and KEDA in the cluster.",
		Attributes: map[string]schema.Attribute{
			"namespace": schema.StringAttribute{Required: true, Validators: []validator.String{kubeNameRule},
				MarkdownDescription: "The platform's namespace, where `llmplat render`'s platform objects are."},
			"revision":       req("The weights' revision: the folder under the model's name in the bucket."),
			"s3_bucket":      req("The S3 bucket modelsync copies the weights from."),
			"s3_region":      req("The bucket's region."),
			"engine_image":   req("The vLLM image by digest (`<repository>@sha256:<digest>`), as copied into the account's ECR: a tag is refused, since it names whatever was pushed to it last."),
			"platform_image": req("The llmplat image (its modelsync command fills the model cache)."),
			"prometheus_url": req("Where KEDA reads the scaling metrics, for example http://prometheus-operated.monitoring.svc:9090."),
			"profile": schema.StringAttribute{Optional: true, Computed: true,
				MarkdownDescription: "The capacity planner's model profile (llama-8b, qwen-32b, llama-70b). Default: the model's name."},
			"gpu": req("The GPU profile the planner sizes the engine for (for example L40S)."),
			"gpus_per_replica": schema.Int64Attribute{CustomType: wholeNumber, Optional: true, Computed: true, Validators: []validator.Int64{positive},
				MarkdownDescription: "GPUs per replica (vLLM's --tensor-parallel-size). Default 1."},
			"node_pool": schema.StringAttribute{Optional: true, Computed: true, Validators: []validator.String{kubeNameRule},
				MarkdownDescription: "The on-demand Karpenter NodePool; the spot pool is this name with -spot. Default gpu-<gpu in lower case>."},
			"min_replicas": schema.Int64Attribute{CustomType: wholeNumber, Optional: true, Computed: true, Validators: []validator.Int64{notNegative},
				MarkdownDescription: "The warm floor; 0 scales the model to zero when idle (the platform queues the first request while a replica loads). Default 1."},
			"max_replicas": schema.Int64Attribute{CustomType: wholeNumber, Required: true, Validators: []validator.Int64{positive},
				MarkdownDescription: "The most replicas KEDA may run."},
			"spot": schema.BoolAttribute{Optional: true, Computed: true,
				MarkdownDescription: "Allow spot nodes as well (spread across on-demand and spot). Default false."},
			"warm": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "Keep one replica warm in a window, for a model that scales to zero (KEDA's cron trigger).",
				Attributes: map[string]schema.Attribute{
					"timezone": req("An IANA time zone, for example Europe/Berlin."),
					"start":    req("Cron: when the window opens, for example 0 8 * * 1-5."),
					"end":      req("Cron: when it closes."),
				}},
			"max_model_len": fromPlanner("The longest context an engine takes (--max-model-len)."),
			"max_num_seqs":  fromPlanner("The batch an engine runs at most (--max-num-seqs)."),
			"planned_streams_per_replica": schema.Int64Attribute{CustomType: wholeNumber, Required: true, Validators: []validator.Int64{positive},
				MarkdownDescription: "The batch a replica is planned to run, below what memory allows (the reference workload: 32 for an 8B model on one L40S); " +
					"the planner's input for max_num_seqs, which allows bursts above it."},
			"drain_seconds": schema.Int64Attribute{CustomType: wholeNumber, Optional: true, Computed: true, Validators: []validator.Int64{notNegative},
				MarkdownDescription: "How long a stopping engine's streams may run on. Default 300."},
			"kv_cache_tokens": schema.Int64Attribute{CustomType: wholeNumber, Computed: true, MarkdownDescription: "Tokens of KV cache a replica holds, by the planner."},
		},
	}
}

// known reports whether every value the objects depend on is known.
func (d *deploymentModel) known(m *modelModel) bool {
	if m.Name.IsUnknown() || m.ServedName.IsUnknown() {
		return false
	}
	for _, v := range []types.String{d.Namespace, d.Revision, d.S3Bucket, d.S3Region, d.EngineImage, d.PlatformImage,
		d.PrometheusURL, d.Profile, d.GPU, d.NodePool} {
		if v.IsUnknown() {
			return false
		}
	}
	for _, v := range []types.Int64{d.GPUsPerReplica, d.MinReplicas, d.MaxReplicas, d.MaxModelLen, d.MaxNumSeqs,
		d.PlannedStreamsPerReplica, d.DrainSeconds} {
		if v.IsUnknown() {
			return false
		}
	}
	if d.Spot.IsUnknown() {
		return false
	}
	return d.Warm == nil || !(d.Warm.Timezone.IsUnknown() || d.Warm.Start.IsUnknown() || d.Warm.End.IsUnknown())
}

// render is the deployment as render takes it, a setting left null at its
// default: the same function reads a configuration (nulls) and a state
// (every value filled in), so both render the same objects.
func (d *deploymentModel) render(name, servedName string) render.ModelDeployment {
	or := func(v types.Int64, def int64) int64 {
		if v.IsNull() || v.IsUnknown() {
			return def
		}
		return v.ValueInt64()
	}
	gpu := d.GPU.ValueString()
	w := capacity.WorkloadSpec{Model: stringOr(d.Profile, name), GPU: gpu,
		TensorParallelSize:       int(or(d.GPUsPerReplica, defaultGPUsPerReplica)),
		MaxModelLen:              or(d.MaxModelLen, 0),
		PlannedStreamsPerReplica: int(or(d.PlannedStreamsPerReplica, 0)),
		MinReplicas:              int(or(d.MinReplicas, defaultMinReplicas)), MaxReplicas: int(or(d.MaxReplicas, 0))}
	if w.MaxModelLen > 0 && w.MaxModelLen < capacity.DefaultContextTokens {
		// A short model length bounds the typical context too.
		w.ContextTokens = w.MaxModelLen
	}
	md := render.ModelDeployment{Name: name, ServedName: servedName, Revision: d.Revision.ValueString(),
		Namespace: d.Namespace.ValueString(), EngineImage: d.EngineImage.ValueString(), PlatformImage: d.PlatformImage.ValueString(),
		Bucket: d.S3Bucket.ValueString(), Region: d.S3Region.ValueString(), PrometheusURL: d.PrometheusURL.ValueString(),
		NodePool: stringOr(d.NodePool, "gpu-"+strings.ToLower(gpu)), Spot: d.Spot.ValueBool(),
		MinReplicas: w.MinReplicas, MaxReplicas: w.MaxReplicas,
		DrainSeconds: int(or(d.DrainSeconds, defaultDrainSeconds)), Workload: w, MaxNumSeqs: or(d.MaxNumSeqs, 0)}
	if d.Warm != nil {
		md.Warm = &render.Warm{Timezone: d.Warm.Timezone.ValueString(), Start: d.Warm.Start.ValueString(), End: d.Warm.End.ValueString()}
	}
	return md
}

// filled is the deployment with its defaults and the planner's answers.
func (d deploymentModel) filled(md render.ModelDeployment, mm render.ModelManifest) *deploymentModel {
	d.Profile, d.NodePool = types.StringValue(md.Workload.Model), types.StringValue(md.NodePool)
	d.GPUsPerReplica = types.Int64Value(int64(md.Workload.TensorParallelSize))
	d.MinReplicas, d.Spot = types.Int64Value(int64(md.MinReplicas)), types.BoolValue(md.Spot)
	d.DrainSeconds = types.Int64Value(int64(md.DrainSeconds))
	d.MaxModelLen, d.MaxNumSeqs = types.Int64Value(mm.Flags.MaxModelLen), types.Int64Value(mm.Flags.MaxNumSeqs)
	d.KVCacheTokens = types.Int64Value(mm.KVCapacityTokens)
	return &d
}

// unknownComputed is the deployment with every value the planner or a
// default would fill, and the configuration leaves null, unknown.
func (d deploymentModel) unknownComputed() *deploymentModel {
	for _, v := range []*types.String{&d.Profile, &d.NodePool} {
		if v.IsNull() {
			*v = types.StringUnknown()
		}
	}
	for _, v := range []*types.Int64{&d.GPUsPerReplica, &d.MinReplicas, &d.DrainSeconds, &d.MaxModelLen, &d.MaxNumSeqs} {
		if v.IsNull() {
			*v = types.Int64Unknown()
		}
	}
	if d.Spot.IsNull() {
		d.Spot = types.BoolUnknown()
	}
	d.KVCacheTokens = types.Int64Unknown()
	return &d
}

// ModifyPlan renders the deployment at plan time: the planner's flags and
// the objects' digests show in the plan, and what cannot be rendered (a
// model that does not fit its GPUs, a floor above the cap) fails the plan
// at its attribute.
func (r *modelResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var cfg, plan modelModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Deployment == nil {
		plan.Deployment, plan.KubernetesObjects = nil, types.MapNull(types.StringType)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	if r.data != nil && r.data.kube == nil {
		resp.Diagnostics.AddAttributeError(path.Root("deployment"), "No Kubernetes access", noKubeMessage)
		return
	}
	if !cfg.Deployment.known(&cfg) {
		plan.Deployment, plan.KubernetesObjects = cfg.Deployment.unknownComputed(), types.MapUnknown(types.StringType)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	md := cfg.Deployment.render(cfg.Name.ValueString(), cfg.ServedName.ValueString())
	mm, err := render.RenderModel(md)
	if err != nil {
		at := renderPath(err)
		resp.Diagnostics.AddAttributeError(at, "Invalid "+at.String(), renderDetail(err))
		return
	}
	objs, err := decodeObjects(mm.Data)
	if err != nil {
		resp.Diagnostics.AddError("Deployment not rendered", err.Error())
		return
	}
	if c := cfg.MaxContextTokens; !c.IsUnknown() && !c.IsNull() && c.ValueInt64() > mm.Flags.MaxModelLen {
		resp.Diagnostics.AddAttributeError(path.Root("max_context_tokens"), "Context longer than the engines take",
			"max_context_tokens is above the deployment's max_model_len ("+itoa(mm.Flags.MaxModelLen)+"): the engines would refuse "+
				"what the platform admits. Lower it, or raise deployment.max_model_len.")
		return
	}
	plan.Deployment, plan.KubernetesObjects = cfg.Deployment.filled(md, mm), objectsMap(objs, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// renderDetail is a render refusal without render's own prefix.
func renderDetail(err error) string {
	return strings.TrimPrefix(err.Error(), render.ErrInvalid.Error()+": ")
}

// renderPath is the attribute a render refusal names.
func renderPath(err error) path.Path {
	if !errors.Is(err, render.ErrInvalid) {
		return path.Root("deployment")
	}
	field, _, _ := strings.Cut(renderDetail(err), ":")
	switch field {
	case "name", "served_name":
		return path.Root(field)
	case "bucket", "region":
		return path.Root("deployment").AtName("s3_" + field)
	case "workload", "":
		return path.Root("deployment")
	}
	return path.Root("deployment").AtName(field)
}
