package provider

import (
	"context"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminrules"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/render"
)

// modelResource is llmplat_model: the model as the platform declares it
// and, with a deployment, its engines' objects in the cluster.
type modelResource struct {
	client *adminclient.Client
	data   *providerData
}

func newModelResource() resource.Resource { return &modelResource{} }

var (
	_ resource.ResourceWithConfigure      = (*modelResource)(nil)
	_ resource.ResourceWithImportState    = (*modelResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*modelResource)(nil)
	_ resource.ResourceWithValidateConfig = (*modelResource)(nil)
)

type modelModel struct {
	ID                types.String     `tfsdk:"id"`
	Name              types.String     `tfsdk:"name"`
	ServedName        types.String     `tfsdk:"served_name"`
	PromptPrice       types.Int64      `tfsdk:"prompt_price_micro_per_mtok"`
	CompletionPrice   types.Int64      `tfsdk:"completion_price_micro_per_mtok"`
	MaxContextTokens  types.Int64      `tfsdk:"max_context_tokens"`
	MaxOutputTokens   types.Int64      `tfsdk:"max_output_tokens"`
	Deployment        *deploymentModel `tfsdk:"deployment"`
	KubernetesObjects types.Map        `tfsdk:"kubernetes_objects"`
}

func (r *modelResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_model"
}

func (r *modelResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A model the platform serves: its name, the name its engines answer to, its prices and limits " +
			"(PUT /admin/models/{name}), and with `deployment` its engines in the cluster: the Deployment, headless " +
			"Service, PodDisruptionBudget and KEDA ScaledObject of `llmplat render`, server-side applied with the " +
			"provider's kubernetes access. Changes apply in place; a refresh notices a changed price and a cluster object " +
			"changed or deleted outside Terraform (`kubernetes_objects`), and the next apply puts them back. Destroy " +
			"removes the objects, then the model. Without `deployment` the resource manages no cluster objects. Creating a " +
			"model the platform already declares fails (\"already exists — import it\") rather than overwrite it: import it " +
			"to manage it (the models `make run` declares, for example).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The model's name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, MarkdownDescription: "The platform's model name, which clients ask for. Changing it replaces the model.",
				Validators: []validator.String{nameValidator{}}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"served_name": schema.StringAttribute{Required: true, MarkdownDescription: "The name the engines answer to (vLLM's --served-model-name): 1 to 256 characters without spaces.",
				Validators: []validator.String{stringRule{desc: "1 to 256 characters without spaces", rule: adminrules.ServedName}}},
			"prompt_price_micro_per_mtok": schema.Int64Attribute{CustomType: wholeNumber, Required: true, Validators: []validator.Int64{priceRule("prompt_price_micro_per_mtok")},
				MarkdownDescription: "Microcredits per million prompt tokens."},
			"completion_price_micro_per_mtok": schema.Int64Attribute{CustomType: wholeNumber, Required: true, Validators: []validator.Int64{priceRule("completion_price_micro_per_mtok")},
				MarkdownDescription: "Microcredits per million completion tokens."},
			"max_context_tokens": schema.Int64Attribute{CustomType: wholeNumber, Required: true,
				Validators:          []validator.Int64{int64Rule{desc: "a positive 32-bit integer", rule: adminrules.MaxContextTokens}},
				MarkdownDescription: "The longest context a request may have, at most 2147483647; with a deployment, at most its max_model_len."},
			"max_output_tokens": schema.Int64Attribute{CustomType: wholeNumber, Required: true,
				Validators: []validator.Int64{int64Rule{desc: "positive", rule: func(v int64) *adminrules.FieldError {
					return adminrules.MaxOutputTokens(v, adminrules.MaxInt64Limit)
				}}},
				MarkdownDescription: "The longest answer a request may ask for; at most max_context_tokens."},
			"deployment": deploymentSchema(),
			"kubernetes_objects": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The deployment's objects (Kind/namespace/name), each with the digest of what was applied, or \"" +
					driftChanged + "\" or \"" + driftAbsent + "\" when a refresh found it so."},
		},
	}
}

func (r *modelResource) Configure(ctx context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = dataFrom(req.ProviderData, &resp.Diagnostics)
	if r.data != nil && r.data.ready(ctx, &resp.Diagnostics) {
		r.client = r.data.client
	}
}

func (m *modelModel) spec() adminwire.ModelSpec {
	return adminwire.ModelSpec{ServedName: m.ServedName.ValueString(), PromptPriceMicroPerMTok: m.PromptPrice.ValueInt64(),
		CompletionPriceMicroPerMTok: m.CompletionPrice.ValueInt64(), MaxContextTokens: int(m.MaxContextTokens.ValueInt64()),
		MaxOutputTokens: int(m.MaxOutputTokens.ValueInt64())}
}

func (m *modelModel) set(x adminwire.Model) {
	m.ID, m.Name, m.ServedName = types.StringValue(x.Name), types.StringValue(x.Name), types.StringValue(x.ServedName)
	m.PromptPrice, m.CompletionPrice = types.Int64Value(x.PromptPriceMicroPerMTok), types.Int64Value(x.CompletionPriceMicroPerMTok)
	m.MaxContextTokens, m.MaxOutputTokens = types.Int64Value(int64(x.MaxContextTokens)), types.Int64Value(int64(x.MaxOutputTokens))
}

// put declares the model as the plan says, applies its objects, and
// records the answer in state: Create and Update alike, since server-side
// apply is an upsert. prior is the state before (nil on create, which
// declares the model create-only: see Create): objects it had that the plan
// no longer has (a namespace changed, the deployment dropped) are removed.
func (r *modelResource) put(ctx context.Context, plan tfsdk.Plan, prior *modelModel, state *tfsdk.State, diags *diag.Diagnostics) {
	var m modelModel
	diags.Append(plan.Get(ctx, &m)...)
	if diags.HasError() {
		return
	}
	var (
		x   adminwire.Model
		err error
	)
	if prior == nil {
		x, _, err = r.client.CreateModel(ctx, m.Name.ValueString(), m.spec(), "")
	} else {
		x, _, err = r.client.PutModel(ctx, m.Name.ValueString(), m.spec())
	}
	if adminclient.IsAlreadyExists(err) {
		diags.AddAttributeError(path.Root("name"), "Model already exists — import it",
			"The platform already declares a model named "+strconv.Quote(m.Name.ValueString())+", made outside this configuration. "+
				"Creating it would overwrite its declaration and destroying it would delete it: to manage it here, import it "+
				"(an import block with id = "+strconv.Quote(m.Name.ValueString())+", or terraform import <address> "+m.Name.ValueString()+").")
		return
	}
	if err != nil {
		diags.AddError("Model not declared", err.Error())
		return
	}
	m.set(x)
	want, ok := r.objectsOf(ctx, &m, diags)
	if !ok {
		return
	}
	if prior != nil {
		had, ok := r.objectsOf(ctx, prior, diags)
		if !ok {
			return
		}
		var gone []kubeObject
		for _, o := range had {
			if _, keep := digests(want)[o.key]; !keep {
				gone = append(gone, o)
			}
		}
		if len(gone) > 0 {
			if err := r.data.kube.remove(ctx, gone); err != nil {
				diags.AddError("Old cluster objects not removed", err.Error())
				return
			}
		}
	}
	if len(want) > 0 {
		if _, err := r.data.kube.apply(ctx, want, false); err != nil {
			// The model is declared: keep it in state, tainted by the
			// error, so the next apply finishes the job.
			m.KubernetesObjects = types.MapNull(types.StringType)
			diags.Append(state.Set(ctx, &m)...)
			diags.AddError("Cluster objects not applied", err.Error())
			return
		}
	}
	m.KubernetesObjects = objectsMap(want, diags)
	diags.Append(state.Set(ctx, &m)...)
}

// objectsOf renders m's deployment into its objects; none without one.
func (r *modelResource) objectsOf(ctx context.Context, m *modelModel, diags *diag.Diagnostics) ([]kubeObject, bool) {
	if m.Deployment == nil {
		return nil, true
	}
	if r.data == nil || r.data.kube == nil {
		diags.AddAttributeError(path.Root("deployment"), "No Kubernetes access", noKubeMessage)
		return nil, false
	}
	mm, err := render.RenderModel(m.Deployment.render(m.Name.ValueString(), m.ServedName.ValueString()))
	if err != nil {
		diags.AddAttributeError(path.Root("deployment"), "Deployment not rendered", err.Error())
		return nil, false
	}
	objs, err := decodeObjects(mm.Data)
	if err != nil {
		diags.AddError("Deployment not rendered", err.Error())
		return nil, false
	}
	return objs, true
}

// objectsMap is kubernetes_objects for objs: null without a deployment.
func objectsMap(objs []kubeObject, diags *diag.Diagnostics) types.Map {
	if len(objs) == 0 {
		return types.MapNull(types.StringType)
	}
	v, d := types.MapValueFrom(context.Background(), types.StringType, digests(objs))
	diags.Append(d...)
	return v
}

const noKubeMessage = "deployment applies the model's objects to a cluster, and the provider was given no Kubernetes access: " +
	"add a kubernetes block to the provider (config_path, or host with a token or exec), or set " + EnvKubeConfigPath +
	". Without deployment, llmplat_model only registers the model with the platform."

// Create refuses a model the platform already declares (a plain PUT is an
// upsert: it would overwrite that declaration, and destroy would delete
// it): the declaration is create-only, so the platform decides between
// concurrent applies, and the client's retry of a create whose answer was
// lost reuses its Idempotency-Key and gets this model back.
func (r *modelResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.put(ctx, req.Plan, nil, &resp.State, &resp.Diagnostics)
}

func (r *modelResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if r.client == nil {
		// The provider's endpoint or token is known only after another
		// resource's apply: keep the state as it is until then.
		return
	}
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
	if m.Deployment != nil && r.data != nil && r.data.kube != nil {
		objs, ok := r.objectsOf(ctx, &m, &resp.Diagnostics)
		if !ok {
			return
		}
		seen, err := r.data.kube.observe(ctx, objs)
		if err != nil {
			resp.Diagnostics.AddError("Cluster objects not read", err.Error())
			return
		}
		v, d := types.MapValueFrom(ctx, types.StringType, seen)
		resp.Diagnostics.Append(d...)
		m.KubernetesObjects = v
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *modelResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var prior modelModel
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	r.put(ctx, req.Plan, &prior, &resp.State, &resp.Diagnostics)
}

func (r *modelResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m modelModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// The engines first: a model the platform no longer knows should not
	// keep GPUs busy.
	objs, ok := r.objectsOf(ctx, &m, &resp.Diagnostics)
	if !ok {
		return
	}
	if len(objs) > 0 {
		if err := r.data.kube.remove(ctx, objs); err != nil {
			resp.Diagnostics.AddError("Cluster objects not removed", err.Error())
			return
		}
	}
	if err := r.client.DeleteModel(ctx, m.ID.ValueString()); err != nil && !notFound(err) {
		resp.Diagnostics.AddError("Model not removed", err.Error())
	}
}

// ImportState takes a model by name. Its deployment is not read back from
// the cluster: declare it in the configuration, and the next apply adopts
// the objects (server-side apply takes over their fields).
func (r *modelResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

// priceRule is the admin API's rule for a price field.
func priceRule(field string) int64Rule {
	return int64Rule{desc: "not negative", rule: func(v int64) *adminrules.FieldError { return adminrules.Price(field, v) }}
}

// ValidateConfig refuses at plan a max_output_tokens above
// max_context_tokens, as the admin API would, at max_output_tokens.
func (r *modelResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var out, maxContext types.Int64
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("max_output_tokens"), &out)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("max_context_tokens"), &maxContext)...)
	if resp.Diagnostics.HasError() || out.IsNull() || out.IsUnknown() || maxContext.IsNull() || maxContext.IsUnknown() {
		return
	}
	refuse(path.Root("max_output_tokens"), adminrules.MaxOutputTokens(out.ValueInt64(), maxContext.ValueInt64()), &resp.Diagnostics)
}
