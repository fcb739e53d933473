package provider

import (
	"context"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/admin"
)

// teamResource is llmplat_team.
type teamResource struct {
	client *admin.Client
}

func newTeamResource() resource.Resource { return &teamResource{} }

var (
	_ resource.ResourceWithConfigure   = (*teamResource)(nil)
	_ resource.ResourceWithImportState = (*teamResource)(nil)
)

type teamModel struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Balance   types.Int64  `tfsdk:"balance_microcredits"`
	Reserved  types.Int64  `tfsdk:"reserved_microcredits"`
	Available types.Int64  `tfsdk:"available_microcredits"`
}

func (r *teamResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_team"
}

func (r *teamResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A tenant of the platform: its API keys and credits belong to it. The platform keeps a team " +
			"for its ledger history: destroying this resource removes it from Terraform's state only.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, Description: "The team's numeric id, as a string.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required: true, Description: "The team's unique name: 1 to 64 letters, digits, '.', '_' or '-'. Renaming keeps the team, its keys and its credits.",
				Validators: []validator.String{nameValidator{}},
			},
			"balance_microcredits": schema.Int64Attribute{
				Computed: true, Description: "Credits granted minus costs settled, in microcredits, as last read; spending never causes a diff.",
			},
			"reserved_microcredits": schema.Int64Attribute{
				Computed: true, Description: "Microcredits held by requests still running, as last read.",
			},
			"available_microcredits": schema.Int64Attribute{
				Computed: true, Description: "Balance minus reserved: what new requests may reserve, as last read.",
			},
		},
	}
}

func (r *teamResource) Configure(ctx context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientFrom(ctx, req.ProviderData, &resp.Diagnostics)
}

// set copies a team into m.
func (m *teamModel) set(t admin.Team) {
	m.ID = types.StringValue(strconv.FormatInt(t.ID, 10))
	m.Name = types.StringValue(t.Name)
	m.Balance = types.Int64Value(t.BalanceMicrocredits)
	m.Reserved = types.Int64Value(t.ReservedMicrocredits)
	m.Available = types.Int64Value(t.AvailableMicrocredits)
}

func (r *teamResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m teamModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	t, created, err := r.client.CreateTeam(ctx, m.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Team not created", err.Error())
		return
	}
	if !created {
		resp.Diagnostics.AddWarning("Team already existed",
			"A team named "+t.Name+" already existed (id "+strconv.FormatInt(t.ID, 10)+"); this resource now manages it.")
	}
	m.set(t)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *teamResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if r.client == nil {
		// The provider's endpoint or token is known only after another
		// resource's apply: keep the state as it is until then.
		return
	}
	var m teamModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, ok := parseID(m.ID.ValueString(), &resp.Diagnostics)
	if !ok {
		return
	}
	t, err := r.client.GetTeam(ctx, id)
	if notFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Team not read", err.Error())
		return
	}
	m.set(t)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *teamResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state teamModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, ok := parseID(state.ID.ValueString(), &resp.Diagnostics)
	if !ok {
		return
	}
	name := plan.Name.ValueString()
	t, err := r.client.UpdateTeam(ctx, id, admin.UpdateTeamRequest{Name: &name})
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Team not updated", err.Error())
		return
	}
	plan.set(t)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete forgets the team: the platform keeps teams for their ledger.
func (r *teamResource) Delete(_ context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	resp.Diagnostics.AddWarning("Team kept on the platform",
		"llmplat keeps a team for its ledger history; it was removed from Terraform's state only. Revoke its keys to stop its use.")
}

func (r *teamResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if _, ok := parseID(req.ID, &resp.Diagnostics); !ok {
		return
	}
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}
