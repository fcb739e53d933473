package provider

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminwire"
)

// clientFrom takes the admin client the provider configured, once the
// platform answered the provider's credentials check (see ready).
func clientFrom(ctx context.Context, data any, diags *diag.Diagnostics) *adminclient.Client {
	if d := dataFrom(data, diags); d != nil && d.ready(ctx, diags) {
		return d.client
	}
	return nil
}

// dataFrom takes what the provider configured; nil before it was (in
// validation, or while its settings are unknown).
func dataFrom(data any, diags *diag.Diagnostics) *providerData {
	if data == nil {
		return nil
	}
	d, ok := data.(*providerData)
	if !ok {
		diags.AddError("Provider misconfigured", "The llmplat provider did not hand its resources its configuration.")
		return nil
	}
	return d
}

// notFound reports an admin API 404.
func notFound(err error) bool {
	var ae *adminwire.APIError
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

// configured reports whether the provider has its admin client; a data
// source cannot be read before, and says why.
func configured(c *adminclient.Client, diags *diag.Diagnostics) bool {
	if c == nil {
		diags.AddError("Provider not configured yet",
			"The llmplat provider's endpoint or token is not known yet (it comes from a resource not applied): "+
				"a data source can be read only once they are.")
		return false
	}
	return true
}
