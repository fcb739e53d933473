package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/admin"
)

// modelResource is llmplat_model: the model as the platform declares it.
type modelResource struct {
	client *admin.Client
}

func newModelResource() resource.Resource { return &modelResource{} }

var (
	_ resource.ResourceWithConfigure   = (*modelResource)(nil)
	_ resource.ResourceWithImportState = (*modelResource)(nil)
)

type modelModel struct {
	ID               types.String `tfsdk:"id"`
	Name             types.String `tfsdk:"name"`
	ServedName       types.String `tfsdk:"served_name"`
	PromptPrice      types.Int64  `tfsdk:"prompt_price_micro_per_mtok"`
	CompletionPrice  types.Int64  `tfsdk:"completion_price_micro_per_mtok"`
	MaxContextTokens types.Int64  `tfsdk:"max_context_tokens"`
	MaxOutputTokens  types.Int64  `tfsdk:"max_output_tokens"`
}

func (r *modelResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_model"
}

func (r *modelResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	positive := []validator.Int64{positiveValidator{}}
	resp.Schema = schema.Schema{
		Description: "A model the platform serves: its name, the name its engines answer to, its prices and limits " +
			"(PUT /admin/models/{name}); changes apply in place, and destroy removes it from the platform. This resource " +
			"manages no cluster objects: render those with `llmplat render`, or feed `llmplat_capacity_plan`'s flags to your deployment.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The model's name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, Description: "The platform's model name, which clients ask for. Changing it replaces the model.",
				Validators: []validator.String{nameValidator{}}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"served_name": schema.StringAttribute{Required: true, Description: "The name the engines answer to (vLLM's --served-model-name)."},
			"prompt_price_micro_per_mtok": schema.Int64Attribute{Required: true, Validators: []validator.Int64{nonNegativeValidator{}},
				Description: "Microcredits per million prompt tokens."},
			"completion_price_micro_per_mtok": schema.Int64Attribute{Required: true, Validators: []validator.Int64{nonNegativeValidator{}},
				Description: "Microcredits per million completion tokens."},
			"max_context_tokens": schema.Int64Attribute{Required: true, Validators: positive,
				Description: "The longest context a request may have (the engine's --max-model-len, as llmplat_capacity_plan gives it)."},
			"max_output_tokens": schema.Int64Attribute{Required: true, Validators: positive,
				Description: "The longest answer a request may ask for."},
		},
	}
}

func (r *modelResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientFrom(req.ProviderData, &resp.Diagnostics)
}

func (m *modelModel) spec() admin.ModelSpec {
	return admin.ModelSpec{ServedName: m.ServedName.ValueString(), PromptPriceMicroPerMTok: m.PromptPrice.ValueInt64(),
		CompletionPriceMicroPerMTok: m.CompletionPrice.ValueInt64(), MaxContextTokens: int(m.MaxContextTokens.ValueInt64()),
		MaxOutputTokens: int(m.MaxOutputTokens.ValueInt64())}
}

func (m *modelModel) set(x admin.Model) {
	m.ID, m.Name, m.ServedName = types.StringValue(x.Name), types.StringValue(x.Name), types.StringValue(x.ServedName)
	m.PromptPrice, m.CompletionPrice = types.Int64Value(x.PromptPriceMicroPerMTok), types.Int64Value(x.CompletionPriceMicroPerMTok)
	m.MaxContextTokens, m.MaxOutputTokens = types.Int64Value(int64(x.MaxContextTokens)), types.Int64Value(int64(x.MaxOutputTokens))
}

// put declares the model as the plan says and records the answer in
// state: Create and Update alike, since PUT is an upsert.
func (r *modelResource) put(ctx context.Context, plan tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics) {
	var m modelModel
	diags.Append(plan.Get(ctx, &m)...)
	if diags.HasError() {
		return
	}
	x, _, err := r.client.PutModel(ctx, m.Name.ValueString(), m.spec())
	if err != nil {
		diags.AddError("Model not declared", err.Error())
		return
	}
	m.set(x)
	diags.Append(state.Set(ctx, &m)...)
}

func (r *modelResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.put(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *modelResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m modelModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	x, err := r.client.GetModel(ctx, m.ID.ValueString())
	if notFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Model not read", err.Error())
		return
	}
	m.set(x)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *modelResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.put(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *modelResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m modelModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.client.DeleteModel(ctx, m.ID.ValueString()); err != nil && !notFound(err) {
		resp.Diagnostics.AddError("Model not removed", err.Error())
	}
}

func (r *modelResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}
