package provider

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminrules"
	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/agentflags"
	"github.com/llmplat/llmplat/runtime/credential"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// onpremNodeResource is llmplat_onprem_node: a node behind NAT, its token
// and its agent's command line.
type onpremNodeResource struct {
	client *adminclient.Client
}

func newOnpremNodeResource() resource.Resource { return &onpremNodeResource{} }

var (
	_ resource.ResourceWithConfigure      = (*onpremNodeResource)(nil)
	_ resource.ResourceWithImportState    = (*onpremNodeResource)(nil)
	_ resource.ResourceWithValidateConfig = (*onpremNodeResource)(nil)
)

type onpremNodeModel struct {
	ID           types.String `tfsdk:"id"`
	NodeID       types.String `tfsdk:"node_id"`
	Orchestrator types.String `tfsdk:"orchestrator_url"`
	EngineURL    types.String `tfsdk:"engine_url"`
	Models       types.List   `tfsdk:"models"`
	GPUCount     types.Int64  `tfsdk:"gpu_count"`
	Labels       types.Map    `tfsdk:"labels"`
	TokenID      types.String `tfsdk:"token_id"`
	Token        types.String `tfsdk:"token"`
	AgentCommand types.String `tfsdk:"agent_command"`
}

type nodeModelSpec struct {
	Name        types.String `tfsdk:"name"`
	ServedName  types.String `tfsdk:"served_name"`
	MaxNumSeqs  types.Int64  `tfsdk:"max_num_seqs"`
	MaxModelLen types.Int64  `tfsdk:"max_model_len"`
	KVTokens    types.Int64  `tfsdk:"kv_cache_tokens"`
}

var nodeModelAttrTypes = map[string]attr.Type{"name": types.StringType, "served_name": types.StringType,
	"max_num_seqs": wholeNumber, "max_model_len": wholeNumber, "kv_cache_tokens": wholeNumber}

func (r *onpremNodeResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_onprem_node"
}

func (r *onpremNodeResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	// count is the admin API's rule for a count of the declaration.
	count := func(field string) []validator.Int64 {
		return []validator.Int64{int64Rule{desc: "1 to 2147483647",
			rule: func(v int64) *adminrules.FieldError { return adminrules.NodeCount(field, v) }}}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "An on-premises GPU node behind NAT, whose node agent dials the orchestrators: the resource issues " +
			"its token (bound to node_id) and gives the agent's command line. Destroying it revokes the token, and a " +
			"connected agent is disconnected within seconds. The platform stores the node's declaration (every attribute but " +
			"the token), so an import by node id reads it all back — except the token, which the platform keeps only as a " +
			"hash: after an import `token` is null; keep the agent's token, or replace the resource to issue a new one.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The node id.", PlanModifiers: keep},
			"node_id": schema.StringAttribute{Required: true,
				MarkdownDescription: "The node's id: 1 to 64 letters, digits, '.', '_' or '-'. Changing it replaces the node and its token.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:          []validator.String{nodeIDValidator{}}},
			"orchestrator_url": schema.StringAttribute{Required: true,
				MarkdownDescription: "The orchestrators' node socket the agent dials: a ws:// or wss:// URL with a host (wss://host/v1/nodes/connect). " +
					"Checked at plan with the agent's own flag rules."},
			"engine_url": schema.StringAttribute{Optional: true,
				MarkdownDescription: "The engine's base URL as the agent reaches it; unset means the agent's default (http://127.0.0.1:8000)."},
			"models": schema.ListNestedAttribute{Required: true,
				MarkdownDescription: "The models the node's engine serves, with its limits (the agent's -model flags): at least one, each name once, " +
					"and no ',' in a served_name (the agent's -model value could not hold it).",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true, MarkdownDescription: "The platform's model name.", Validators: []validator.String{nameValidator{}}},
					"served_name": schema.StringAttribute{Required: true, MarkdownDescription: "The name the engine answers to (--served-model-name).",
						Validators: []validator.String{stringRule{desc: "1 to 256 characters without spaces", rule: adminrules.ServedName}}},
					"max_num_seqs":    schema.Int64Attribute{CustomType: wholeNumber, Required: true, MarkdownDescription: "The engine's --max-num-seqs.", Validators: count("max_num_seqs")},
					"max_model_len":   schema.Int64Attribute{CustomType: wholeNumber, Required: true, MarkdownDescription: "The engine's --max-model-len.", Validators: count("max_model_len")},
					"kv_cache_tokens": schema.Int64Attribute{CustomType: wholeNumber, Required: true, MarkdownDescription: "Tokens of KV cache the engine holds (vLLM logs it; llmplat plan prints it).", Validators: count("kv_cache_tokens")},
				}},
			},
			"gpu_count": schema.Int64Attribute{CustomType: wholeNumber, Optional: true, Validators: count("gpu_count"),
				MarkdownDescription: "GPUs in the node, for the inventory: stored on the platform and shown in /admin/nodes (declared.gpu_count) " +
					"beside the count the agent registers (gpus). Shown, not enforced: the agent counts the GPUs it is given " +
					"(CUDA_VISIBLE_DEVICES, MIG), which may differ from the hardware for good reasons."},
			"labels": schema.MapAttribute{ElementType: types.StringType, Optional: true, Validators: []validator.Map{labelsRule{}},
				MarkdownDescription: "Free labels for the inventory (site, rack, owner): stored on the platform and shown in /admin/nodes " +
					"(declared.labels). At most 64; keys 1 to 63 and values up to 63 printable characters."},
			"token_id": schema.StringAttribute{Computed: true, MarkdownDescription: "The node token's id.", PlanModifiers: keep},
			"token": schema.StringAttribute{Computed: true, Sensitive: true, PlanModifiers: keep,
				MarkdownDescription: "The node token, minted by the provider at creation (and sent to the platform, so a lost answer cannot lose it): give it to the agent in LLMPLAT_NODE_TOKEN. Null after an import: the platform keeps only its hash."},
			"agent_command": schema.StringAttribute{Computed: true,
				MarkdownDescription: "The node agent's command line for this node; the token goes in the LLMPLAT_NODE_TOKEN environment variable."},
		},
	}
}

func (r *onpremNodeResource) Configure(ctx context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientFrom(ctx, req.ProviderData, &resp.Diagnostics)
}

// command is the agent's command line for m.
func (m *onpremNodeModel) command(ctx context.Context) (string, error) {
	var specs []nodeModelSpec
	if d := m.Models.ElementsAs(ctx, &specs, false); d.HasError() {
		return "", fmt.Errorf("models: %v", d)
	}
	args := []string{"llmplat", "nodeagent", "-server=" + m.Orchestrator.ValueString(), "-node-id=" + m.NodeID.ValueString()}
	if !m.EngineURL.IsNull() && m.EngineURL.ValueString() != "" {
		args = append(args, "-engine="+m.EngineURL.ValueString())
	}
	for _, s := range specs {
		args = append(args, "-model="+agentflags.FormatModel(s.model()))
	}
	for i, a := range args {
		if strings.ContainsAny(a, " '\"$`\\") {
			args[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(args, " "), nil
}

func (r *onpremNodeResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m onpremNodeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	node := m.NodeID.ValueString()
	// The declaration goes first: a PUT is harmless to repeat, and a node
	// with a token always has one for an import to read.
	if !r.declare(ctx, &m, &resp.Diagnostics) {
		return
	}
	// The token is minted here and sent: the answer carries no token, so a
	// lost answer replayed under the same Idempotency-Key loses nothing.
	token, _, err := credential.GenerateNodeToken()
	if err != nil {
		resp.Diagnostics.AddError("Node token not minted", err.Error())
		return
	}
	tok, err := r.client.IssueNodeTokenTo(ctx, node, token, "")
	if err != nil {
		resp.Diagnostics.AddError("Node token not issued", err.Error())
		return
	}
	m.ID, m.TokenID, m.Token = types.StringValue(node), types.StringValue(strconv.FormatInt(tok.ID, 10)), types.StringValue(token)
	r.finish(ctx, &m, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// declare stores m's declaration on the platform: the agent's command line
// inputs and the inventory fields, which /admin/nodes shows.
func (r *onpremNodeResource) declare(ctx context.Context, m *onpremNodeModel, diags *diag.Diagnostics) bool {
	spec, err := m.declaration(ctx)
	if err != nil {
		diags.AddError("Node declaration not built", err.Error())
		return false
	}
	if _, err := r.client.PutNodeDeclaration(ctx, m.NodeID.ValueString(), spec); err != nil {
		diags.AddError("Node declaration not stored", err.Error())
		return false
	}
	return true
}

// finish fills the agent's command line.
func (r *onpremNodeResource) finish(ctx context.Context, m *onpremNodeModel, diags interface{ AddError(string, string) }) {
	cmd, err := m.command(ctx)
	if err != nil {
		diags.AddError("Agent command not built", err.Error())
		return
	}
	m.AgentCommand = types.StringValue(cmd)
}

func (r *onpremNodeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if r.client == nil {
		// The provider's endpoint or token is known only after another
		// resource's apply: keep the state as it is until then.
		return
	}
	var m onpremNodeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	tokens, err := r.client.ListNodeTokens(ctx, m.NodeID.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Node tokens not read", err.Error())
		return
	}
	live := slices.IndexFunc(tokens, func(t adminwire.NodeToken) bool {
		return strconv.FormatInt(t.ID, 10) == m.TokenID.ValueString() && t.RevokedAt == nil
	})
	if live < 0 {
		// Its token was revoked or is gone: the next apply issues one.
		resp.State.RemoveResource(ctx)
		return
	}
	switch d, err := r.client.GetNodeDeclaration(ctx, m.NodeID.ValueString()); {
	case err == nil:
		if err := m.fromDeclaration(ctx, d); err != nil {
			resp.Diagnostics.AddError("Node declaration not read", err.Error())
			return
		}
		r.finish(ctx, &m, &resp.Diagnostics)
	case !notFound(err):
		resp.Diagnostics.AddError("Node declaration not read", err.Error())
		return
	}
	// Without a declaration (a node created by an older provider) the
	// state is kept as it is; the next update stores one.
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update stores the new declaration and changes what the agent's command
// line says; the token stays.
func (r *onpremNodeResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state onpremNodeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.ID, plan.TokenID, plan.Token = state.ID, state.TokenID, state.Token
	if !r.declare(ctx, &plan, &resp.Diagnostics) {
		return
	}
	r.finish(ctx, &plan, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete revokes the node's token, so the orchestrator owning its socket
// closes it and the agent cannot register again, then deletes its
// declaration.
func (r *onpremNodeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m onpremNodeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, ok := parseID(m.TokenID.ValueString(), &resp.Diagnostics)
	if !ok {
		return
	}
	if _, err := r.client.RevokeNodeToken(ctx, id); err != nil && !notFound(err) {
		resp.Diagnostics.AddError("Node token not revoked", err.Error())
		return
	}
	// The token first: a failure here leaves the node cut off, and the
	// retried destroy revokes again (a no-op) before this.
	if err := r.client.DeleteNodeDeclaration(ctx, m.NodeID.ValueString()); err != nil {
		resp.Diagnostics.AddError("Node declaration not deleted", err.Error())
	}
}

// ImportState takes a node id: the node's newest live token is the one
// managed, without its secret (the platform keeps only its hash); Read
// then fills the rest from the node's declaration.
func (r *onpremNodeResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	tokens, err := r.client.ListNodeTokens(ctx, req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Node tokens not read", err.Error())
		return
	}
	var live *adminwire.NodeToken
	for i := range tokens {
		if tokens[i].RevokedAt == nil {
			live = &tokens[i]
		}
	}
	if live == nil {
		resp.Diagnostics.AddError("No live token", "Node "+req.ID+" has no unrevoked token to manage; create the resource instead.")
		return
	}
	if _, err := r.client.GetNodeDeclaration(ctx, req.ID); err != nil {
		if notFound(err) {
			resp.Diagnostics.AddError("No declaration to import",
				"Node "+req.ID+" has a live token but no declaration on the platform (its agent was set up by hand or by a "+
					"provider before declarations were stored): create the resource instead, which issues a new token, and "+
					"revoke the old one.")
			return
		}
		resp.Diagnostics.AddError("Node declaration not read", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("node_id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("token_id"), strconv.FormatInt(live.ID, 10))...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("token"), types.StringNull())...)
}

// nodeIDValidator refuses a node id the node protocol would.
type nodeIDValidator struct{}

func (nodeIDValidator) Description(context.Context) string {
	return "a node id the node protocol accepts"
}

func (v nodeIDValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (nodeIDValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if !nodeproto.ValidID(req.ConfigValue.ValueString()) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid node id",
			"A node id is 1 to "+strconv.Itoa(nodeproto.MaxIDLen)+" letters, digits, '.', '_' or '-'.")
	}
}
