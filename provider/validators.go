package provider

import (
	"context"
	"regexp"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/adminrules"
	"github.com/llmplat/llmplat/runtime/credential"
)

// nameValidator refuses at plan time a name the admin API would refuse.
type nameValidator struct{}

func (nameValidator) Description(context.Context) string {
	return "a name the admin API accepts: " + adminrules.IdentRule
}

func (v nameValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (nameValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	refuse(req.Path, adminrules.Ident("name", req.ConfigValue.ValueString()), &resp.Diagnostics)
}

// refuse reports a shared admin rule's refusal at the attribute p, with
// the message the admin API gives for the same value.
func refuse(p path.Path, e *adminrules.FieldError, diags *diag.Diagnostics) {
	if e != nil {
		diags.AddAttributeError(p, "Value the platform refuses", e.Msg+".")
	}
}

// stringRule applies one of the admin API's rules (runtime/adminrules) to
// a string attribute at plan.
type stringRule struct {
	desc string
	rule func(string) *adminrules.FieldError
}

func (v stringRule) Description(context.Context) string { return v.desc }

func (v stringRule) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v stringRule) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	refuse(req.Path, v.rule(req.ConfigValue.ValueString()), &resp.Diagnostics)
}

// int64Rule applies one of the admin API's rules to an integer attribute
// at plan.
type int64Rule struct {
	desc string
	rule func(int64) *adminrules.FieldError
}

func (v int64Rule) Description(context.Context) string { return v.desc }

func (v int64Rule) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v int64Rule) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	refuse(req.Path, v.rule(req.ConfigValue.ValueInt64()), &resp.Diagnostics)
}

// limitRule is the admin API's rule for the limit field: 0 (unlimited) up
// to max.
func limitRule(field string, max int64) int64Rule {
	return int64Rule{desc: "0 (unlimited) up to " + itoa(max),
		rule: func(v int64) *adminrules.FieldError { return adminrules.Limit(field, v, max) }}
}

// teamIDRule refuses a team id that is not a team's numeric id.
var teamIDRule = stringRule{desc: "a team's numeric id (llmplat_team.<name>.id)",
	rule: func(s string) *adminrules.FieldError { _, e := adminrules.ParseTeamID(s); return e }}

// allowlistRule applies the admin API's allowlist rule to a set of model
// names once all are known.
type allowlistRule struct{}

func (allowlistRule) Description(context.Context) string {
	return "model names the admin API accepts, at most " + strconv.Itoa(adminrules.MaxAllowlist)
}

func (v allowlistRule) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (allowlistRule) ValidateSet(ctx context.Context, req validator.SetRequest, resp *validator.SetResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	var names []types.String
	if d := req.ConfigValue.ElementsAs(ctx, &names, false); d.HasError() {
		return
	}
	list := make([]string, 0, len(names))
	for _, n := range names {
		if n.IsUnknown() {
			return // checked when known, at apply's plan
		}
		list = append(list, n.ValueString())
	}
	refuse(req.Path, adminrules.Allowlist(list), &resp.Diagnostics)
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
	if !credential.LooksLikeKey(req.ConfigValue.ValueString()) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid key secret",
			"The secret must be llp_ followed by 43 base62 characters: mint it with the llmplat_key_material ephemeral resource.")
	}
}

// kubeName is a Kubernetes name (an RFC 1123 label).
var kubeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// kubeNameRule refuses a name Kubernetes would.
var kubeNameRule = stringvalidator.RegexMatches(kubeName,
	"must be a Kubernetes name: lower-case letters, digits and -, at most 63, starting and ending with a letter or digit")

// positive and notNegative are the integer bounds the platform's limits
// and counts share.
var (
	positive    = int64validator.AtLeast(1)
	notNegative = int64validator.AtLeast(0)
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// labelsRule applies the admin API's rule for a node's labels at plan.
type labelsRule struct{}

func (labelsRule) Description(context.Context) string {
	return "at most 64 labels; keys of 1 to 63 bytes, values of at most 63, no control characters"
}

func (v labelsRule) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (labelsRule) ValidateMap(ctx context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	labels := map[string]string{}
	for k, e := range req.ConfigValue.Elements() {
		s, ok := e.(types.String)
		if !ok || s.IsUnknown() {
			return // checked at apply, once known
		}
		labels[k] = s.ValueString()
	}
	refuse(req.Path, adminrules.NodeLabels(labels), &resp.Diagnostics)
}
