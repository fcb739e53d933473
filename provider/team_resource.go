package provider

import (
	"context"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminrules"
	"github.com/llmplat/llmplat/runtime/adminwire"
)

// teamResource is llmplat_team.
type teamResource struct {
	client *adminclient.Client
	data   *providerData
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
	// SelfService and PersonalKeyMaxDays are the team's self-service
	// switch and the longest life of a personal key.
	SelfService        types.Bool  `tfsdk:"self_service_keys"`
	PersonalKeyMaxDays types.Int64 `tfsdk:"personal_key_max_days"`
}

func (r *teamResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_team"
}

func (r *teamResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	// A team's balances are what the last refresh read: an update (a
	// rename) does not change them, so a plan shows them, not "known after
	// apply".
	lastRead := []planmodifier.Int64{int64planmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A tenant of the platform: its API keys and credits belong to it. The platform keeps a team " +
			"for its ledger history: destroying this resource removes it from Terraform's state and releases it on the " +
			"platform, and a later create of the same name by Terraform takes it back (same id, keys and credits), so a " +
			"destroy then an apply of the same configuration works. Creating a team whose name the platform holds otherwise " +
			"(made outside Terraform, or by another configuration) fails (\"already exists — import it\"): import it to manage it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, MarkdownDescription: "The team's numeric id, as a string.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required: true, MarkdownDescription: "The team's unique name: 1 to 64 letters, digits, '.', '_' or '-'. Renaming keeps the team, its keys and its credits.",
				Validators: []validator.String{nameValidator{}},
			},
			"balance_microcredits": schema.Int64Attribute{
				Computed: true, PlanModifiers: lastRead,
				MarkdownDescription: "Credits granted minus costs settled, in microcredits, as last read by a refresh; spending never causes a diff, " +
					"and a rename keeps the value read (credits are llmplat_credit resources, applied after the team: the next refresh reads them).",
			},
			"reserved_microcredits": schema.Int64Attribute{
				Computed: true, PlanModifiers: lastRead, MarkdownDescription: "Microcredits held by requests still running, as last read by a refresh.",
			},
			"available_microcredits": schema.Int64Attribute{
				Computed: true, PlanModifiers: lastRead, MarkdownDescription: "Balance minus reserved: what new requests may reserve, as last read by a refresh.",
			},
			"self_service_keys": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Whether the team's members may create, name, scope and revoke personal API keys in the web console " +
					"(default false). A personal key may use only models and limits within its maker's own key, and expires within " +
					"`personal_key_max_days`; its secret is shown once. Personal keys are not Terraform's: this provider neither reads " +
					"nor plans them, so they cause no drift, and the keys Terraform declares (`llmplat_api_key`) stay read-only in the " +
					"console. Turning this off stops new personal keys; those made stay until they expire or are revoked.",
			},
			"personal_key_max_days": schema.Int64Attribute{
				CustomType: wholeNumber, Optional: true, Computed: true, Default: int64default.StaticInt64(adminrules.DefaultPersonalKeyDays),
				MarkdownDescription: "The longest life, in days, of a personal key made in the console: 1 to " +
					itoa(adminrules.MaxPersonalKeyDays) + ", default " + itoa(adminrules.DefaultPersonalKeyDays) +
					". Lowering it does not shorten keys already made.",
				Validators: []validator.Int64{int64Rule{desc: "1 to " + itoa(adminrules.MaxPersonalKeyDays) + " days",
					rule: adminrules.PersonalKeyMaxDays}},
			},
		},
	}
}

func (r *teamResource) Configure(ctx context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = dataFrom(req.ProviderData, &resp.Diagnostics)
	r.client = clientFrom(ctx, req.ProviderData, &resp.Diagnostics)
}

// set copies a team into m.
func (m *teamModel) set(t adminwire.Team) {
	m.ID = types.StringValue(strconv.FormatInt(t.ID, 10))
	m.Name = types.StringValue(t.Name)
	m.Balance = types.Int64Value(t.BalanceMicrocredits)
	m.Reserved = types.Int64Value(t.ReservedMicrocredits)
	m.Available = types.Int64Value(t.AvailableMicrocredits)
	m.SelfService = types.BoolValue(t.SelfServiceKeys)
	m.PersonalKeyMaxDays = types.Int64Value(int64(t.PersonalKeyMaxDays))
}

// selfServicePatch is the update that gives the team m's self-service
// settings, and whether t lacks them.
func (m *teamModel) selfServicePatch(t adminwire.Team) (adminwire.UpdateTeamRequest, bool) {
	on, days := m.SelfService.ValueBool(), int(m.PersonalKeyMaxDays.ValueInt64())
	return adminwire.UpdateTeamRequest{SelfServiceKeys: &on, PersonalKeyMaxDays: &days},
		t.SelfServiceKeys != on || t.PersonalKeyMaxDays != days
}

func (r *teamResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m teamModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// A team made outside this configuration is refused, not taken over:
	// the create is create-only, so the platform's unique name decides
	// between concurrent applies; a team this provider released at a
	// destroy is taken back. The client's retry of a create whose
	// answer was lost reuses its Idempotency-Key and gets this team back.
	t, _, err := r.client.CreateTeamOnly(ctx, m.Name.ValueString(), "")
	if adminclient.IsAlreadyExists(err) {
		teamExists(ctx, r.client, m.Name.ValueString(), &resp.Diagnostics)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Team not created", err.Error())
		return
	}
	// The self-service settings are a second call: on its failure the
	// team is kept in state as it is (and tainted by the error), never
	// left on the platform unknown to Terraform.
	if patch, differ := m.selfServicePatch(t); differ {
		updated, err := r.client.UpdateTeam(ctx, t.ID, patch)
		if err != nil {
			m.set(t)
			resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
			resp.Diagnostics.AddAttributeError(path.Root("self_service_keys"), "Team's self-service settings not set", err.Error())
			return
		}
		t = updated
	}
	m.set(t)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// teamExists says that the platform already has a team called name, with
// the import to write; the id is looked up for it, and left to the reader
// when the lookup fails.
func teamExists(ctx context.Context, c *adminclient.Client, name string, diags *diag.Diagnostics) {
	id := "<the team's id>"
	if teams, err := c.ListTeams(ctx); err == nil {
		for _, t := range teams {
			if t.Name == name {
				id = strconv.FormatInt(t.ID, 10)
			}
		}
	}
	diags.AddAttributeError(path.Root("name"), "Team already exists — import it",
		"The platform already has a team named "+strconv.Quote(name)+" (id "+id+"), made outside this configuration: "+
			"to manage it here, import it (an import block with id = \""+id+"\", or terraform import <address> "+id+").")
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
	patch, _ := plan.selfServicePatch(adminwire.Team{})
	patch.Name = &name
	t, err := r.client.UpdateTeam(ctx, id, patch)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Team not updated", err.Error())
		return
	}
	// The balances stay as planned (as last read): spending or a credit
	// between plan and apply would otherwise make the apply's result differ
	// from its plan, which Terraform reports as a provider error. The next
	// refresh reads them.
	balance, reserved, available := plan.Balance, plan.Reserved, plan.Available
	plan.set(t)
	if !balance.IsUnknown() && !reserved.IsUnknown() && !available.IsUnknown() {
		plan.Balance, plan.Reserved, plan.Available = balance, reserved, available
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete releases the team: the platform keeps teams for their ledger, and
// a later create of the same name by Terraform takes it back (see Create).
func (r *teamResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if !configured(r.client, &resp.Diagnostics) {
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
	if _, err := r.client.ReleaseTeam(ctx, id); err != nil && !notFound(err) {
		resp.Diagnostics.AddError("Team not released", err.Error())
		return
	}
	r.data.warnOnce(&resp.Diagnostics, "Teams kept on the platform",
		"llmplat keeps a team for its ledger history: each llmplat_team this command destroys is removed from Terraform's "+
			"state and released on the platform, not deleted (this warning is given once per command). Applying a "+
			"configuration with the same team name later takes the team back, with its id, keys and credits; a team made "+
			"outside Terraform is never taken. Keys made outside Terraform keep working until revoked.")
}

func (r *teamResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if _, ok := parseID(req.ID, &resp.Diagnostics); !ok {
		return
	}
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}
