package provider

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/llmplat/llmplat/runtime/admin"
)

// clientFrom takes the admin client the provider configured.
func clientFrom(data any, diags *diag.Diagnostics) *admin.Client {
	if data == nil {
		return nil // not configured yet (validation, or an unknown endpoint)
	}
	c, ok := data.(*admin.Client)
	if !ok {
		diags.AddError("Provider misconfigured", "The llmplat provider did not hand its resources an admin client.")
		return nil
	}
	return c
}

// notFound reports an admin API 404.
func notFound(err error) bool {
	var ae *admin.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// parseID reads a numeric id kept as a string.
func parseID(s string, diags *diag.Diagnostics) (int64, bool) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		diags.AddError("Invalid id", "The id "+strconv.Quote(s)+" is not a positive number.")
		return 0, false
	}
	return id, true
}
