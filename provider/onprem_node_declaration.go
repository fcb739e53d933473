package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// nodeModelObjectType is the element type of the models attribute.
var nodeModelObjectType = types.ObjectType{AttrTypes: nodeModelAttrTypes}

// declaration is what m declares, as the platform stores it. Null
// gpu_count and labels stay undeclared (nil), so they read back null.
func (m *onpremNodeModel) declaration(ctx context.Context) (adminwire.NodeDeclarationSpec, error) {
	var specs []nodeModelSpec
	if d := m.Models.ElementsAs(ctx, &specs, false); d.HasError() {
		return adminwire.NodeDeclarationSpec{}, fmt.Errorf("models: %v", d)
	}
	out := adminwire.NodeDeclarationSpec{OrchestratorURL: m.Orchestrator.ValueString(), EngineURL: m.EngineURL.ValueString(),
		Models: make([]adminwire.NodeDeclaredModel, 0, len(specs))}
	for _, s := range specs {
		out.Models = append(out.Models, adminwire.NodeDeclaredModel{Name: s.Name.ValueString(), ServedName: s.ServedName.ValueString(),
			MaxNumSeqs: s.MaxNumSeqs.ValueInt64(), MaxModelLen: s.MaxModelLen.ValueInt64(), KVCacheTokens: s.KVTokens.ValueInt64()})
	}
	if !m.GPUCount.IsNull() {
		n := m.GPUCount.ValueInt64()
		out.GPUCount = &n
	}
	if !m.Labels.IsNull() {
		out.Labels = map[string]string{}
		if d := m.Labels.ElementsAs(ctx, &out.Labels, false); d.HasError() {
			return adminwire.NodeDeclarationSpec{}, fmt.Errorf("labels: %v", d)
		}
	}
	return out, nil
}

// fromDeclaration sets m's declared attributes from d, as the platform
// holds them: an empty engine_url and an undeclared gpu_count or labels
// are null, as in a configuration that leaves them out.
func (m *onpremNodeModel) fromDeclaration(ctx context.Context, d adminwire.NodeDeclaration) error {
	specs := make([]nodeModelSpec, 0, len(d.Models))
	for _, s := range d.Models {
		specs = append(specs, nodeModelSpec{Name: types.StringValue(s.Name), ServedName: types.StringValue(s.ServedName),
			MaxNumSeqs: types.Int64Value(s.MaxNumSeqs), MaxModelLen: types.Int64Value(s.MaxModelLen), KVTokens: types.Int64Value(s.KVCacheTokens)})
	}
	models, diags := types.ListValueFrom(ctx, nodeModelObjectType, specs)
	if diags.HasError() {
		return fmt.Errorf("models: %v", diags)
	}
	m.Models, m.Orchestrator = models, types.StringValue(d.OrchestratorURL)
	m.EngineURL = types.StringNull()
	if d.EngineURL != "" {
		m.EngineURL = types.StringValue(d.EngineURL)
	}
	m.GPUCount = types.Int64PointerValue(d.GPUCount)
	m.Labels = types.MapNull(types.StringType)
	if d.Labels != nil {
		labels, diags := types.MapValueFrom(ctx, types.StringType, d.Labels)
		if diags.HasError() {
			return fmt.Errorf("labels: %v", diags)
		}
		m.Labels = labels
	}
	return nil
}
