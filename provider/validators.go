package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/llmplat/llmplat/runtime/admin"
)

// nameValidator refuses at plan time a name the admin API would refuse.
type nameValidator struct{}

func (nameValidator) Description(context.Context) string {
	return "a name the admin API accepts"
}

func (v nameValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (nameValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := admin.CheckName(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid name", "The name "+err.Error()+".")
	}
}

// nonZeroValidator refuses zero.
type nonZeroValidator struct{}

func (nonZeroValidator) Description(context.Context) string { return "must not be zero" }

func (v nonZeroValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (nonZeroValidator) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if !req.ConfigValue.IsNull() && !req.ConfigValue.IsUnknown() && req.ConfigValue.ValueInt64() == 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid amount",
			"A credit of zero changes nothing; a negative amount is a correction.")
	}
}

// positiveValidator refuses zero and negative values.
type positiveValidator struct{}

func (positiveValidator) Description(context.Context) string { return "must be positive" }

func (v positiveValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (positiveValidator) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if !req.ConfigValue.IsNull() && !req.ConfigValue.IsUnknown() && req.ConfigValue.ValueInt64() <= 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid value", "The value must be positive.")
	}
}
