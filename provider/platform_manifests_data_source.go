package provider

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/render"
)

// platformManifestsDataSource is llmplat_platform_manifests: `llmplat
// render` in HCL, so the in-cluster layer applies the platform's own
// objects (runtime, Karpenter pools, device plugin, monitoring) without a
// rendering step outside Terraform.
type platformManifestsDataSource struct{}

func newPlatformManifestsDataSource() datasource.DataSource { return platformManifestsDataSource{} }

type platformManifestsModel struct {
	Description   types.String `tfsdk:"description"`
	IncludeModels types.Bool   `tfsdk:"include_models"`
	Manifests     types.Map    `tfsdk:"manifests"`
}

func (platformManifestsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_platform_manifests"
}

func (platformManifestsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The platform's Kubernetes objects as `llmplat render` writes them, from a platform description: " +
			"the namespace, gateway and orchestrator with their accounts and rights, the Karpenter EC2NodeClass and GPU " +
			"NodePools, the device plugin and DCGM exporter settings, the monitors, alerts and dashboard. Each object is " +
			"JSON, for `kubernetes_manifest` (`jsondecode`). It reads no API.",
		Attributes: map[string]schema.Attribute{
			"description": schema.StringAttribute{Required: true,
				MarkdownDescription: "The platform description, YAML (`yamlencode` of an object), as `llmplat render -f` reads it (docs/kubernetes.md)."},
			"include_models": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "Also the models' objects (model-<name>.yaml). Default false: llmplat_model's deployment applies those."},
			"manifests": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Each object as JSON, keyed by <file>/<Kind>/<namespace>/<name> (the namespace empty for cluster-wide kinds)."},
		},
	}
}

func (platformManifestsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m platformManifestsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, err := render.Parse([]byte(m.Description.ValueString()))
	if err == nil {
		var files []render.File
		if files, err = render.Render(p); err == nil {
			out := map[string]string{}
			for _, f := range files {
				if strings.HasPrefix(f.Name, "model-") && !m.IncludeModels.ValueBool() {
					continue
				}
				objs, derr := decodeObjects(f.Data)
				if derr != nil {
					resp.Diagnostics.AddError("Manifests not rendered", derr.Error())
					return
				}
				for _, o := range objs {
					b, jerr := json.Marshal(o.obj.Object)
					if jerr != nil {
						resp.Diagnostics.AddError("Manifests not rendered", jerr.Error())
						return
					}
					out[f.Name+"/"+o.key] = string(b)
				}
			}
			v, d := types.MapValueFrom(ctx, types.StringType, out)
			resp.Diagnostics.Append(d...)
			m.Manifests = v
		}
	}
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("description"), "Invalid platform description", renderDetail(err))
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
