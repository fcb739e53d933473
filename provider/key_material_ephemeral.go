package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/credential"
)

// keyMaterial is the ephemeral llmplat_key_material: a fresh API key
// secret on every run, never in plan or state.
type keyMaterial struct{}

func newKeyMaterial() ephemeral.EphemeralResource { return keyMaterial{} }

type keyMaterialModel struct {
	Secret types.String `tfsdk:"secret"`
	Prefix types.String `tfsdk:"prefix"`
}

func (keyMaterial) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_key_material"
}

func (keyMaterial) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Mints an API key secret in Terraform, never stored in plan or state: give it to llmplat_api_key's " +
			"write-only secret_wo, and in the same run to wherever the key's user reads it (a write-only attribute of a " +
			"secret store). Each run mints a new one; llmplat_api_key takes it only at creation and when secret_wo_version changes.",
		Attributes: map[string]schema.Attribute{
			"secret": schema.StringAttribute{Computed: true, Sensitive: true, MarkdownDescription: "The secret: llp_ and 43 base62 characters (256 random bits)."},
			"prefix": schema.StringAttribute{Computed: true, MarkdownDescription: "Its first characters, as the platform shows them."},
		},
	}
}

func (keyMaterial) Open(ctx context.Context, _ ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	k, err := credential.GenerateKey()
	if err != nil {
		resp.Diagnostics.AddError("Key material not minted", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.Result.Set(ctx, keyMaterialModel{Secret: types.StringValue(k.Secret), Prefix: types.StringValue(k.Display)})...)
}
