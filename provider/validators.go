package provider

import (
	"context"
	"regexp"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/auth"
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
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid value", req.Path.String()+" must be positive.")
	}
}

// nonNegativeValidator refuses negative limits.
type nonNegativeValidator struct{}

func (nonNegativeValidator) Description(context.Context) string {
	return "must be 0 (unlimited) or more"
}

func (v nonNegativeValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (nonNegativeValidator) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if !req.ConfigValue.IsNull() && !req.ConfigValue.IsUnknown() && req.ConfigValue.ValueInt64() < 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Negative limit", req.Path.String()+": a limit is 0 (unlimited) or more.")
	}
}

// rfc3339Validator refuses a time that is not RFC 3339.
type rfc3339Validator struct{}

func (rfc3339Validator) Description(context.Context) string { return "a time in RFC 3339" }

func (v rfc3339Validator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (rfc3339Validator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := time.Parse(time.RFC3339, req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid time", "Give a time in RFC 3339, for example 2027-01-31T00:00:00Z.")
	}
}

// keyShapeValidator refuses a client-minted secret the platform would.
type keyShapeValidator struct{}

func (keyShapeValidator) Description(context.Context) string {
	return "llp_ and 43 base62 characters, as llmplat_key_material mints"
}

func (v keyShapeValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (keyShapeValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if !auth.LooksLikeKey(req.ConfigValue.ValueString()) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid key secret",
			"The secret must be llp_ followed by 43 base62 characters: mint it with the llmplat_key_material ephemeral resource.")
	}
}

// kubeName is a Kubernetes name (an RFC 1123 label).
var kubeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// kubeNameValidator refuses a name Kubernetes would.
type kubeNameValidator struct{}

func (kubeNameValidator) Description(context.Context) string {
	return "a Kubernetes name: lower-case letters, digits and -, at most 63"
}

func (v kubeNameValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (kubeNameValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if !kubeName.MatchString(req.ConfigValue.ValueString()) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Kubernetes name",
			strconv.Quote(req.ConfigValue.ValueString())+" is not a Kubernetes name: lower-case letters, digits and -, at most 63, "+
				"starting and ending with a letter or digit.")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
