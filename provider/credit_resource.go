package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminrules"
	"github.com/llmplat/llmplat/runtime/adminwire"
)

// creditResource is llmplat_credit: one grant, a ledger entry.
type creditResource struct {
	client *adminclient.Client
	data   *providerData
}

func newCreditResource() resource.Resource { return &creditResource{} }

var (
	_ resource.ResourceWithConfigure   = (*creditResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*creditResource)(nil)
	_ resource.ResourceWithImportState = (*creditResource)(nil)
)

type creditModel struct {
	ID             types.String      `tfsdk:"id"`
	TeamID         types.String      `tfsdk:"team_id"`
	Amount         types.Int64       `tfsdk:"amount_microcredits"`
	Note           types.String      `tfsdk:"note"`
	IdempotencyKey types.String      `tfsdk:"idempotency_key"`
	CreatedAt      timetypes.RFC3339 `tfsdk:"created_at"`
}

func (r *creditResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_credit"
}

func (r *creditResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "One credit grant to a team: an entry in the platform's ledger, never a balance to overwrite, so " +
			"a second apply changes nothing whatever the team spent in between. The grant's idempotency key is derived " +
			"from team, amount and note: a retried apply cannot grant twice, and two equal grants need different notes. " +
			"Ledger entries are permanent: a grant cannot be changed (the plan says so), and destroying this resource " +
			"removes it from Terraform's state only; add another llmplat_credit, with a negative amount to take credit back. " +
			"Any grant, made by Terraform or otherwise (the admin API, the CLI), is imported by its ledger entry's id: team, " +
			"amount, note and idempotency key are read back, so a configuration that declares the same team, amount and " +
			"note plans no change. A grant Terraform made and forgot (a destroy) also comes back into state by declaring it " +
			"again with the same team, amount and note: the apply finds the recorded grant under its idempotency key and " +
			"adds nothing, with a warning.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, MarkdownDescription: "The ledger entry's id.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"team_id": schema.StringAttribute{
				Required: true, MarkdownDescription: "The team granted the credit (llmplat_team.<name>.id).",
				Validators: []validator.String{teamIDRule},
			},
			"amount_microcredits": schema.Int64Attribute{CustomType: wholeNumber,
				Required: true, MarkdownDescription: "The amount in microcredits; negative for a correction, never zero, at most 10^15 (a billion credits) either way.",
				Validators: []validator.Int64{int64Rule{desc: "non-zero, at most 10^15 either way", rule: adminrules.CreditAmount}},
			},
			"note": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString(""),
				MarkdownDescription: "Why the credit was granted; part of the grant's identity. At most 1000 bytes, without control characters.",
				Validators:          []validator.String{stringRule{desc: "at most 1000 bytes, no control characters", rule: adminrules.Note}},
			},
			"idempotency_key": schema.StringAttribute{
				Computed: true, MarkdownDescription: "The key the grant was recorded under, derived from team, amount and note.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"created_at": schema.StringAttribute{CustomType: timetypes.RFC3339Type{},
				Computed: true, MarkdownDescription: "When the ledger recorded the grant (RFC 3339).",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
		},
	}
}

func (r *creditResource) Configure(ctx context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = dataFrom(req.ProviderData, &resp.Diagnostics)
	r.client = clientFrom(ctx, req.ProviderData, &resp.Diagnostics)
}

// creditKey derives a grant's idempotency key from what identifies it.
func creditKey(teamID int64, amount int64, note string) string {
	h := sha256.Sum256([]byte(strconv.FormatInt(teamID, 10) + "\x00" + strconv.FormatInt(amount, 10) + "\x00" + note))
	return "terraform-" + hex.EncodeToString(h[:16])
}

func (r *creditResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m creditModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	team, ok := parseID(m.TeamID.ValueString(), &resp.Diagnostics)
	if !ok {
		return
	}
	key := creditKey(team, m.Amount.ValueInt64(), m.Note.ValueString())
	c, err := r.client.AddCredit(ctx, adminwire.CreditRequest{TeamID: team, AmountMicrocredits: m.Amount.ValueInt64(),
		IdempotencyKey: key, Note: m.Note.ValueString()})
	if err != nil {
		resp.Diagnostics.AddError("Credit not granted", err.Error())
		return
	}
	if c.Replayed {
		resp.Diagnostics.AddWarning("Credit already granted",
			"This grant (same team, amount and note) was recorded before, at "+c.CreatedAt.UTC().Format(time.RFC3339)+
				"; nothing was added. Change the note to grant the same amount again.")
	}
	m.ID = types.StringValue(strconv.FormatInt(c.ID, 10))
	m.IdempotencyKey = types.StringValue(key)
	m.CreatedAt = timetypes.NewRFC3339TimeValue(c.CreatedAt.UTC())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read reads the grant's ledger entry back (after an import, all there is
// to know of it); an entry that is gone (its team with it) leaves the
// state.
func (r *creditResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if r.client == nil {
		// The provider's endpoint or token is known only after another
		// resource's apply: keep the state as it is until then.
		return
	}
	var m creditModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, ok := parseID(m.ID.ValueString(), &resp.Diagnostics)
	if !ok {
		return
	}
	c, err := r.client.GetCredit(ctx, id)
	if notFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Credit not read", err.Error())
		return
	}
	m.TeamID = types.StringValue(strconv.FormatInt(c.TeamID, 10))
	m.Amount = types.Int64Value(c.AmountMicrocredits)
	m.Note = types.StringValue(c.Note)
	m.IdempotencyKey = types.StringValue(c.IdempotencyKey)
	if cur, err := time.Parse(time.RFC3339, m.CreatedAt.ValueString()); m.CreatedAt.IsNull() || err != nil || !cur.Equal(c.CreatedAt) {
		m.CreatedAt = timetypes.NewRFC3339TimeValue(c.CreatedAt.UTC())
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// ImportState takes a grant by its ledger entry's id; Read fills the rest.
func (r *creditResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if _, ok := parseID(req.ID, &resp.Diagnostics); !ok {
		return
	}
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

// ModifyPlan refuses a change to a recorded grant: replacing it would
// grant the new amount on top of the old, which stays in the ledger.
func (r *creditResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return // a create, or a destroy
	}
	var plan, state creditModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	for _, f := range []struct {
		attr          string
		planned, last attr.Value
	}{{"team_id", plan.TeamID, state.TeamID}, {"amount_microcredits", plan.Amount, state.Amount}, {"note", plan.Note, state.Note}} {
		if !f.planned.IsUnknown() && !f.planned.Equal(f.last) {
			resp.Diagnostics.AddAttributeError(path.Root(f.attr), "A credit grant cannot be changed",
				"The grant is an entry in the ledger and stays there. Leave this resource as it is and add another "+
					"llmplat_credit for the difference (a negative amount takes credit back).")
		}
	}
}

// Update is never called with a change: ModifyPlan refuses every one.
func (r *creditResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m creditModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete forgets the grant: ledger entries are permanent.
func (r *creditResource) Delete(_ context.Context, _ resource.DeleteRequest, resp *resource.DeleteResponse) {
	r.data.warnOnce(&resp.Diagnostics, "Credits kept in the ledger",
		"Ledger entries are permanent: each llmplat_credit this command destroys is removed from Terraform's state only "+
			"(this warning is given once per command). Add an llmplat_credit with a negative amount to take a grant back.")
}
