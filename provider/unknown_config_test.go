package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccUnknownEndpoint: the provider's endpoint may come from a resource
// applied in the same run (a load balancer made with the cluster): the
// plan waits for it instead of failing, and a refresh while it is unknown
// keeps the state instead of calling an API it cannot reach.
func TestAccUnknownEndpoint(t *testing.T) {
	p := startPlatform(t)
	config := func(input string) string {
		return fmt.Sprintf(`
resource "terraform_data" "endpoint" {
  input = %q
}

provider "llmplat" {
  endpoint = terraform_data.endpoint.output
  token    = %q
}

resource "llmplat_team" "t" {
  name = "late-endpoint"
}
`, input, p.token)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{Config: config(p.base), Check: resource.TestCheckResourceAttr("llmplat_team.t", "name", "late-endpoint")},
			// A new endpoint value replaces terraform_data: while planning,
			// the team is refreshed by a provider that has no endpoint yet.
			{Config: config(p.base + "/"), Check: resource.TestCheckResourceAttr("llmplat_team.t", "name", "late-endpoint")},
		},
	})
}
