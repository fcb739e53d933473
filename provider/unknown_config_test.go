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
			{Config: config(p.URL), Check: resource.TestCheckResourceAttr("llmplat_team.t", "name", "late-endpoint")},
			// A new endpoint value replaces terraform_data: while planning,
			// the team is refreshed by a provider that has no endpoint yet.
			{Config: config(p.URL + "/"), Check: resource.TestCheckResourceAttr("llmplat_team.t", "name", "late-endpoint")},
		},
	})
}

// TestAccUnknownEndpointOfflineAtPlan: on a fresh stack whose endpoint is
// another resource's output (examples/eks), the offline data sources are
// still read at plan, so a count or for_each over them is known, and the
// plan calls no platform (the endpoint given is one nothing listens on).
func TestAccUnknownEndpointOfflineAtPlan(t *testing.T) {
	requireTerraform(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config: `
resource "terraform_data" "endpoint" {
  input = "http://127.0.0.1:1"
}

provider "llmplat" {
  endpoint = terraform_data.endpoint.output
  token    = "not-checked-at-plan"
}

data "llmplat_capacity_plan" "p" {
  model                       = "llama-8b"
  gpu                         = "L40S"
  tensor_parallel_size        = 1
  peak_streams                = 140
  planned_streams_per_replica = 32
  min_replicas                = 2
  max_replicas                = 8
}

resource "terraform_data" "per_replica" {
  count = data.llmplat_capacity_plan.p.replicas
}

resource "llmplat_team" "t" {
  name = "fresh-stack"
}
`,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}},
	})
}
