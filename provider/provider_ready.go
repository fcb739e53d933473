package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/adminwire"
)

// errReadyTimeout is the cause of a readiness wait that ran out.
var errReadyTimeout = errors.New("ready_timeout passed")

// readyTimeout reads ready_timeout, or its environment variable, or the
// default.
func readyTimeout(v types.String) (time.Duration, error) {
	s := stringOr(v, os.Getenv(EnvReadyTimeout))
	if s == "" {
		return defaultReadyTimeout, nil
	}
	return parseReadyTimeout(s)
}

// parseReadyTimeout reads a positive Go duration.
func parseReadyTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive Go duration such as \"90s\" or \"10m\"", s)
	}
	return d, nil
}

// readiness is the provider's credentials check, made once per provider
// process (one terraform command), by the first resource or data source
// that needs the admin API; the ones after it share its outcome. The
// offline data sources never make it, so rendering manifests or planning
// capacity needs no platform.
type readiness struct {
	client   *adminclient.Client
	endpoint string
	timeout  time.Duration

	once  sync.Once
	diags diag.Diagnostics
}

// ready makes the credentials check (once) and reports whether it passed;
// otherwise diags says why.
func (d *providerData) ready(ctx context.Context, diags *diag.Diagnostics) bool {
	if d.readiness == nil {
		return true
	}
	r := d.readiness
	r.once.Do(func() { waitReady(ctx, r.client, r.endpoint, r.timeout, &r.diags) })
	diags.Append(r.diags...)
	return !r.diags.HasError()
}

// refusedForGood reports whether err is a connection refused where no load
// balancer can be on its way: the endpoint's host is an IP address, or the
// address that refused is a loopback one (localhost). Nothing listens
// there, so waiting for ready_timeout would only hide a mistyped endpoint
// or a platform that is down. A host name that does not resolve yet, or
// resolves and refuses, may be a load balancer still being made: that is
// waited for.
func refusedForGood(endpoint string, err error) bool {
	if !errors.Is(err, errConnRefused) {
		return false
	}
	if u, perr := url.Parse(endpoint); perr == nil && net.ParseIP(u.Hostname()) != nil {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		if a, ok := oe.Addr.(*net.TCPAddr); ok && a.IP.IsLoopback() {
			return true
		}
	}
	return false
}

// waitReady verifies the credentials with one cheap authenticated call,
// repeated while the platform is not there, for at most timeout. It
// reports whether the platform answered; otherwise it has said why in
// diags: a refused token or a connection refused for good (see
// refusedForGood) at once, an unreachable platform after timeout.
func waitReady(ctx context.Context, c *adminclient.Client, endpoint string, timeout time.Duration, diags *diag.Diagnostics) bool {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errReadyTimeout)
	defer cancel()
	err := c.WaitReadyUnless(ctx, func(err error) bool { return refusedForGood(endpoint, err) })
	var (
		ae *adminwire.APIError
		de *net.DNSError
	)
	switch {
	case err == nil:
		return true
	case errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden):
		diags.AddError("llmplat admin token refused",
			fmt.Sprintf("The platform at %s refused the provider's admin credential (%v). Check the provider's token or the %s environment variable: "+
				"it must be the bootstrap admin token or a JWT with the admin role.", endpoint, err, EnvToken))
	case refusedForGood(endpoint, err):
		diags.AddError("llmplat platform refused the connection",
			fmt.Sprintf("Nothing listens at %s: the connection was refused (%v). The provider does not wait for ready_timeout "+
				"for an IP address or localhost, where no load balancer can be on its way. Check that the provider's endpoint "+
				"(or %s) is the gateway's base URL and that the gateway runs.", endpoint, err, EnvEndpoint))
	case errors.Is(context.Cause(ctx), errReadyTimeout) && errors.As(err, &de):
		diags.AddError("llmplat platform not ready",
			fmt.Sprintf("The host name of %s did not resolve within ready_timeout (%v): %v. The provider waits for a name that "+
				"does not resolve, because a new load balancer's name takes minutes to: if the endpoint is mistyped, fix it "+
				"(or %s); if the load balancer is new, raise the provider's ready_timeout.", endpoint, timeout, err, EnvEndpoint))
	case errors.Is(context.Cause(ctx), errReadyTimeout):
		diags.AddError("llmplat platform not ready",
			fmt.Sprintf("The platform at %s did not answer within ready_timeout (%v): %v. Check that the provider's endpoint is "+
				"the gateway's base URL and that the gateway runs; raise the provider's ready_timeout if it is still starting.", endpoint, timeout, err))
	default:
		diags.AddError("llmplat platform check failed",
			fmt.Sprintf("Checking the admin credential at %s failed: %v. Check that endpoint is the gateway's base URL "+
				"(without /admin).", endpoint, err))
	}
	return false
}

// durationValidator refuses a ready_timeout that is not a positive Go
// duration, at validation.
type durationValidator struct{}

func (durationValidator) Description(context.Context) string {
	return "a positive Go duration, such as 90s or 10m"
}

func (v durationValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (durationValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := parseReadyTimeout(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid ready_timeout", err.Error())
	}
}
