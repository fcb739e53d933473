package provider

import (
	"net"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/llmplat/llmplat/runtime/adminclient"
)

// teamOnly is one team, the cheapest resource to plan.
const teamOnly = `
resource "llmplat_team" "t" {
  name = "ready-check"
}
`

// TestAccPlanChecksCredentials: a plan of new resources fails, at the
// provider's token, when the admin token is wrong; a CI check on a pull
// request then goes red instead of the merge's apply.
func TestAccPlanChecksCredentials(t *testing.T) {
	p := startPlatform(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config:      providerBlockAt(p.URL, "llpadm_not-the-token-0123456789abcdef", "") + teamOnly,
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)admin token refused.*401`),
		}},
	})
}

// TestAccPlanFailsWhenPlatformDown: a plan against an IP address where
// nothing listens fails at once, naming the endpoint, instead of waiting
// out a ready_timeout of 10 minutes: no load balancer can be on its way
// there.
func TestAccPlanFailsWhenPlatformDown(t *testing.T) {
	requireTerraform(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more: connections are refused
	t.Setenv(EnvReadyTimeout, "10m")
	start := time.Now()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config:      providerBlockAt(down, "llpadm_any-token-0123456789abcdef", "") + teamOnly,
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)platform refused the connection.*Nothing listens at\s+` + regexp.QuoteMeta(down)),
		}},
	})
	if took := time.Since(start); took >= 10*time.Minute {
		t.Errorf("the plan failed after %v, want before its ready_timeout of 10m", took)
	}
}

// TestAccPlanWaitsForUnresolvedName: a host name that does not resolve
// may be a new load balancer's: the plan waits for it, for ready_timeout
// (set short here through its environment variable), then says that the
// name did not resolve.
func TestAccPlanWaitsForUnresolvedName(t *testing.T) {
	requireTerraform(t)
	t.Setenv(EnvReadyTimeout, "3s")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			// .invalid never resolves (RFC 2606).
			Config:      providerBlockAt("http://gateway.llmplat.invalid:8080", "llpadm_any-token-0123456789abcdef", "") + teamOnly,
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)platform not ready.*did not resolve\s+within\s+ready_timeout\s+\(3s\)`),
		}},
	})
}

// TestAccWaitsForGateway: the first full apply configures the provider
// while the gateway is still starting behind its load balancer (503 for
// twice as many calls as one API call's retries ride out); the provider
// waits for it, and the apply succeeds.
func TestAccWaitsForGateway(t *testing.T) {
	p := startPlatform(t)
	starting := 2 * adminclient.DefaultMaxAttempts
	proxy := newFaultProxy(t, p.URL, func(*http.Request) fault {
		if starting > 0 {
			starting--
			return notReady
		}
		return pass
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config: p.providerBlockVia(proxy.URL, "") + teamOnly,
			Check:  resource.TestCheckResourceAttr("llmplat_team.t", "name", "ready-check"),
		}},
	})
	if got := proxy.count(notReady); got != 2*adminclient.DefaultMaxAttempts {
		t.Errorf("the proxy answered 503 %d times, want %d", got, 2*adminclient.DefaultMaxAttempts)
	}
}

// TestAccAllowlistCheckFailureSurfaces: when the platform answers the
// provider's check but then fails to list its models, the plan of a key
// with an allowlist fails at model_allowlist instead of passing unchecked.
func TestAccAllowlistCheckFailureSurfaces(t *testing.T) {
	p := startPlatform(t)
	listed := 0
	proxy := newFaultProxy(t, p.URL, func(r *http.Request) fault {
		if r.Method != http.MethodGet || r.URL.Path != "/admin/models" {
			return pass
		}
		// The first listing is the provider's credentials check.
		if listed++; listed == 1 {
			return pass
		}
		return serverError
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config: p.providerBlockVia(proxy.URL, "") + `
resource "llmplat_api_key" "k" {
  team_id         = "1"
  model_allowlist = ["` + testModel + `"]
}
`,
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)Allowlist not checked.*500`),
		}},
	})
}
