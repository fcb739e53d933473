package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/capacity"
)

// capacityPlanDataSource is llmplat_capacity_plan: the capacity planner in
// HCL, so a model's engine flags come from the arithmetic.
type capacityPlanDataSource struct{}

func newCapacityPlanDataSource() datasource.DataSource { return capacityPlanDataSource{} }

type capacityPlanModel struct {
	Model                    types.String  `tfsdk:"model"`
	GPU                      types.String  `tfsdk:"gpu"`
	TensorParallelSize       types.Int64   `tfsdk:"tensor_parallel_size"`
	PeakStreams              types.Int64   `tfsdk:"peak_streams"`
	PlannedStreamsPerReplica types.Int64   `tfsdk:"planned_streams_per_replica"`
	ContextTokens            types.Int64   `tfsdk:"context_tokens"`
	MinReplicas              types.Int64   `tfsdk:"min_replicas"`
	MaxReplicas              types.Int64   `tfsdk:"max_replicas"`
	Spot                     types.Bool    `tfsdk:"spot"`
	ServedName               types.String  `tfsdk:"served_name"`
	Weights                  types.String  `tfsdk:"weights"`
	Quantization             types.String  `tfsdk:"quantization"`
	InstanceType             types.String  `tfsdk:"instance_type"`
	QuotaVCPUs               types.Int64   `tfsdk:"quota_vcpus"`
	NodeGPUs                 types.Int64   `tfsdk:"node_gpus"`
	MaxNumSeqs               types.Int64   `tfsdk:"max_num_seqs"`
	MaxModelLen              types.Int64   `tfsdk:"max_model_len"`
	GPUMemoryUtilization     types.Float64 `tfsdk:"gpu_memory_utilization"`
	KVCacheTokens            types.Int64   `tfsdk:"kv_cache_tokens"`
	Replicas                 types.Int64   `tfsdk:"replicas"`
	GPUsPerReplica           types.Int64   `tfsdk:"gpus_per_replica"`
	GPUs                     types.Int64   `tfsdk:"gpus"`
	Warnings                 types.List    `tfsdk:"warnings"`
}

func (capacityPlanDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_capacity_plan"
}

func (capacityPlanDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	in := func(d string) schema.Int64Attribute {
		return schema.Int64Attribute{CustomType: wholeNumber, Optional: true, MarkdownDescription: d}
	}
	out := func(d string) schema.Int64Attribute {
		return schema.Int64Attribute{Computed: true, MarkdownDescription: d}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "The capacity planner (llmplat plan) for one model on one GPU profile: KV-cache arithmetic in, " +
			"the engine's flags and the replicas at peak out. It reads no API.",
		Attributes: map[string]schema.Attribute{
			"model":                       schema.StringAttribute{Required: true, MarkdownDescription: "A model profile the planner knows (llama-8b, qwen-32b, llama-70b)."},
			"gpu":                         schema.StringAttribute{Required: true, MarkdownDescription: "A GPU profile the planner knows (for example L40S)."},
			"tensor_parallel_size":        in("GPUs per replica; default 1."),
			"peak_streams":                in("Concurrent streams of the model at peak."),
			"planned_streams_per_replica": in("The batch a replica is planned to run, below what memory allows."),
			"context_tokens":              in("A typical stream's context, prompt plus answer."),
			"min_replicas":                in("The warm floor."),
			"max_replicas":                in("The cap; a plan above it gets a warning."),
			"spot":                        schema.BoolAttribute{Optional: true, MarkdownDescription: "The model may run on spot capacity too: its vCPUs count in the spot quota as well (llmplat plan's quota section)."},
			"served_name":                 schema.StringAttribute{Computed: true, MarkdownDescription: "The model's served name (--served-model-name)."},
			"weights":                     schema.StringAttribute{Computed: true, MarkdownDescription: "The checkpoint the profile was sized for (a Hugging Face repository): what to upload under the model's revision."},
			"quantization":                schema.StringAttribute{Computed: true, MarkdownDescription: "The checkpoint's weight format (bf16, fp16, fp8), which the planner's memory arithmetic assumes."},
			"instance_type":               schema.StringAttribute{Computed: true, MarkdownDescription: "The smallest EC2 instance type that holds a replica's GPUs (empty when none is known)."},
			"quota_vcpus":                 out("EC2 vCPUs the model's nodes take at max_replicas (the peak replicas without a cap), each replica on its own instance_type: its share of the G and VT (or P) vCPU quota."),
			"node_gpus":                   out("GPUs those nodes bring: the model's share of a Karpenter NodePool's nvidia.com/gpu limit."),
			"max_num_seqs":                out("--max-num-seqs."),
			"max_model_len":               out("--max-model-len."),
			"gpu_memory_utilization":      schema.Float64Attribute{Computed: true, MarkdownDescription: "--gpu-memory-utilization."},
			"kv_cache_tokens":             out("Tokens of KV cache a replica holds."),
			"replicas":                    out("Replicas at peak."),
			"gpus_per_replica":            out("GPUs per replica."),
			"gpus":                        out("GPUs at peak."),
			"warnings":                    schema.ListAttribute{ElementType: types.StringType, Computed: true, MarkdownDescription: "Findings that do not stop the plan."},
		},
	}
}

func (capacityPlanDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m capacityPlanModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	w := capacity.WorkloadSpec{Model: m.Model.ValueString(), GPU: m.GPU.ValueString(),
		TensorParallelSize: int(m.TensorParallelSize.ValueInt64()), PeakStreams: int(m.PeakStreams.ValueInt64()),
		PlannedStreamsPerReplica: int(m.PlannedStreamsPerReplica.ValueInt64()), ContextTokens: m.ContextTokens.ValueInt64(),
		MinReplicas: int(m.MinReplicas.ValueInt64()), MaxReplicas: int(m.MaxReplicas.ValueInt64()), Spot: m.Spot.ValueBool()}
	input, err := capacity.File{Workloads: []capacity.WorkloadSpec{w}}.Input()
	if err == nil {
		var res capacity.Result
		if res, err = capacity.Plan(input); err == nil {
			mp := res.Models[0]
			m.ServedName = types.StringValue(mp.ServedName)
			m.Weights, m.Quantization = types.StringValue(mp.Weights), types.StringValue(mp.Quantization)
			q := res.Quota.Models[0]
			m.InstanceType = types.StringValue(q.Instance)
			m.QuotaVCPUs, m.NodeGPUs = types.Int64Value(int64(q.VCPUs)), types.Int64Value(int64(q.NodeGPUs))
			m.MaxNumSeqs, m.MaxModelLen = types.Int64Value(mp.Flags.MaxNumSeqs), types.Int64Value(mp.Flags.MaxModelLen)
			m.GPUMemoryUtilization = types.Float64Value(mp.Flags.GPUMemoryUtilization)
			m.KVCacheTokens = types.Int64Value(mp.Memory.KVCapacityTokensPerReplica)
			m.Replicas, m.GPUsPerReplica, m.GPUs = types.Int64Value(int64(mp.Replicas.Replicas)),
				types.Int64Value(int64(mp.Replicas.GPUsPerReplica)), types.Int64Value(int64(mp.Replicas.GPUs))
			warnings := mp.Warnings
			if warnings == nil {
				warnings = []string{}
			}
			var d diag.Diagnostics
			m.Warnings, d = types.ListValueFrom(ctx, types.StringType, warnings)
			resp.Diagnostics.Append(d...)
		}
	}
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("model"), "No capacity plan", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
