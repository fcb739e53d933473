package provider

import (
	"context"
	"errors"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/llmplat/llmplat/runtime/agentflags"
	"github.com/llmplat/llmplat/runtime/nodeproto"
)

// Stand-ins for values unknown at plan: ValidateConfig checks the known
// flags with agentflags.Parse, and these pass it, so a refusal is of a
// value the configuration gives.
const (
	unknownServer = "wss://unknown.invalid/v1/nodes/connect"
	unknownNodeID = "unknown"
)

// model is the -model value the spec becomes.
func (s nodeModelSpec) model() nodeproto.Model {
	return nodeproto.Model{Name: s.Name.ValueString(), ServedName: s.ServedName.ValueString(),
		MaxNumSeqs: int(s.MaxNumSeqs.ValueInt64()), MaxModelLen: int(s.MaxModelLen.ValueInt64()),
		KVCapacityTokens: s.KVTokens.ValueInt64()}
}

// known reports whether every field of the spec is known.
func (s nodeModelSpec) known() bool {
	return !s.Name.IsUnknown() && !s.ServedName.IsUnknown() && !s.MaxNumSeqs.IsUnknown() &&
		!s.MaxModelLen.IsUnknown() && !s.KVTokens.IsUnknown()
}

// ValidateConfig refuses at plan a node whose agent command the agent
// would refuse: it parses the command's flags with the agent's own rules
// (agentflags.Parse) and shows a refusal at the attribute it comes from.
func (r *onpremNodeResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m onpremNodeModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	cmd := agentflags.Command{Server: m.Orchestrator.ValueString(), NodeID: m.NodeID.ValueString()}
	if m.Orchestrator.IsUnknown() {
		cmd.Server = unknownServer
	}
	if m.NodeID.IsUnknown() || m.NodeID.IsNull() {
		cmd.NodeID = unknownNodeID // node_id has its own validator
	}
	cmd.Models, resp.Diagnostics = modelFlags(ctx, m, resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	_, err := agentflags.Parse(cmd)
	var fe *agentflags.FlagError
	if !errors.As(err, &fe) {
		return
	}
	at := path.Root("models")
	switch {
	case fe.Flag == "server":
		at = path.Root("orchestrator_url")
	case fe.Flag == "node-id":
		at = path.Root("node_id")
	case fe.Index >= 0:
		at = at.AtListIndex(fe.Index)
	}
	resp.Diagnostics.AddAttributeError(at, "Agent command the node agent refuses",
		"The node agent would refuse this: "+fe.Err.Error()+". (Flag -"+fe.Flag+indexNote(fe.Index)+".)")
}

// indexNote names the -model value at fault, if one is.
func indexNote(i int) string {
	if i < 0 {
		return ""
	}
	return ", value " + strconv.Itoa(i+1)
}

// modelFlags returns the -model values of m's models, or a stand-in that
// passes when some are unknown (they are checked once known, at the
// apply's plan).
func modelFlags(ctx context.Context, m onpremNodeModel, diags diag.Diagnostics) ([]string, diag.Diagnostics) {
	standIn := []string{agentflags.FormatModel(nodeproto.Model{Name: "unknown", ServedName: "unknown",
		MaxNumSeqs: 1, MaxModelLen: 1, KVCapacityTokens: 1})}
	if m.Models.IsUnknown() || m.Models.IsNull() {
		return standIn, diags
	}
	var specs []nodeModelSpec
	diags.Append(m.Models.ElementsAs(ctx, &specs, false)...)
	flags := make([]string, 0, len(specs))
	for _, s := range specs {
		if !s.known() {
			return standIn, diags
		}
		flags = append(flags, agentflags.FormatModel(s.model()))
	}
	return flags, diags
}
