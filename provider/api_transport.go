package provider

import (
	"net/http"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// apiTransport is the admin API client's transport: it sets the
// provider's User-Agent on each request and logs each call (method, path,
// status, duration) with tflog, at debug, in the context of the
// Terraform operation that made it. It logs no header, query or body, so
// neither the admin token nor a key's secret reaches a log.
type apiTransport struct {
	next      http.RoundTripper
	userAgent string
}

// userAgent is the User-Agent the provider's admin API calls carry, in the
// form HashiCorp's providers use; terraformVersion is empty when
// Terraform did not say it.
func userAgent(providerVersion, terraformVersion string) string {
	ua := "terraform-provider-llmplat/" + providerVersion
	if terraformVersion != "" {
		ua += " terraform/" + terraformVersion
	}
	return ua
}

// RoundTrip sends a copy of req with the User-Agent set, and logs the call.
func (t *apiTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	out := req.Clone(ctx)
	out.Header.Set("User-Agent", t.userAgent)
	fields := map[string]any{"method": req.Method, "path": req.URL.Path}
	tflog.Debug(ctx, "llmplat admin API call", fields)
	start := time.Now()
	resp, err := t.next.RoundTrip(out)
	fields["duration_ms"] = time.Since(start).Milliseconds()
	if err != nil {
		fields["error"] = err.Error()
		tflog.Debug(ctx, "llmplat admin API call failed", fields)
		return nil, err
	}
	fields["status"] = resp.StatusCode
	tflog.Debug(ctx, "llmplat admin API call answered", fields)
	return resp, nil
}
