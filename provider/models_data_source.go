package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/adminclient"
)

// modelsDataSource is llmplat_models: every declared model.
type modelsDataSource struct {
	client *adminclient.Client
}

func newModelsDataSource() datasource.DataSource { return &modelsDataSource{} }

var _ datasource.DataSourceWithConfigure = (*modelsDataSource)(nil)

var modelAttrTypes = map[string]attr.Type{"name": types.StringType, "served_name": types.StringType,
	"prompt_price_micro_per_mtok": types.Int64Type, "completion_price_micro_per_mtok": types.Int64Type,
	"max_context_tokens": types.Int64Type, "max_output_tokens": types.Int64Type}

func (d *modelsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_models"
}

func (d *modelsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Every model declared on the platform, sorted by name: for allowlists and checks.",
		Attributes: map[string]schema.Attribute{
			"names": schema.ListAttribute{ElementType: types.StringType, Computed: true, MarkdownDescription: "The models' names."},
			"models": schema.ListNestedAttribute{Computed: true, MarkdownDescription: "The models with their prices and limits.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":                            schema.StringAttribute{Computed: true, MarkdownDescription: "The platform's model name."},
					"served_name":                     schema.StringAttribute{Computed: true, MarkdownDescription: "The name the engines answer to."},
					"prompt_price_micro_per_mtok":     schema.Int64Attribute{Computed: true, MarkdownDescription: "Microcredits per million prompt tokens."},
					"completion_price_micro_per_mtok": schema.Int64Attribute{Computed: true, MarkdownDescription: "Microcredits per million completion tokens."},
					"max_context_tokens":              schema.Int64Attribute{Computed: true, MarkdownDescription: "The longest context a request may have."},
					"max_output_tokens":               schema.Int64Attribute{Computed: true, MarkdownDescription: "The longest answer a request may ask for."},
				}}},
		},
	}
}

func (d *modelsDataSource) Configure(ctx context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = clientFrom(ctx, req.ProviderData, &resp.Diagnostics)
}

func (d *modelsDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	if !configured(d.client, &resp.Diagnostics) {
		return
	}
	models, err := d.client.ListModels(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Models not read", err.Error())
		return
	}
	names := make([]attr.Value, 0, len(models))
	objs := make([]attr.Value, 0, len(models))
	for _, m := range models {
		names = append(names, types.StringValue(m.Name))
		o, diags := types.ObjectValue(modelAttrTypes, map[string]attr.Value{"name": types.StringValue(m.Name),
			"served_name":                     types.StringValue(m.ServedName),
			"prompt_price_micro_per_mtok":     types.Int64Value(m.PromptPriceMicroPerMTok),
			"completion_price_micro_per_mtok": types.Int64Value(m.CompletionPriceMicroPerMTok),
			"max_context_tokens":              types.Int64Value(int64(m.MaxContextTokens)),
			"max_output_tokens":               types.Int64Value(int64(m.MaxOutputTokens))})
		resp.Diagnostics.Append(diags...)
		objs = append(objs, o)
	}
	nl, diags := types.ListValue(types.StringType, names)
	resp.Diagnostics.Append(diags...)
	ml, diags := types.ListValue(types.ObjectType{AttrTypes: modelAttrTypes}, objs)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("names"), nl)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("models"), ml)...)
}
