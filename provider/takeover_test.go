package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccCreateExistingFails: creating a model the platform already
// declares, or a team it already has, fails with an import hint and
// leaves what exists as it was, instead of taking it over (and deleting
// the model at destroy).
func TestAccCreateExistingFails(t *testing.T) {
	p := startPlatform(t)
	before, err := p.client.GetModel(t.Context(), testModel)
	if err != nil {
		t.Fatal(err)
	}
	team, _, err := p.client.CreateTeam(t.Context(), "made-by-hand")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, config string
		want         *regexp.Regexp
	}{
		{"model", `
resource "llmplat_model" "m" {
  name                            = "` + testModel + `"
  served_name                     = "taken-over"
  prompt_price_micro_per_mtok     = 1
  completion_price_micro_per_mtok = 1
  max_context_tokens              = 4096
  max_output_tokens               = 512
}
`, regexp.MustCompile(`(?s)Model already exists\s+—\s+import it.*import block with id\s+=\s+"` + testModel + `"`)},
		{"team", `
resource "llmplat_team" "t" {
  name = "made-by-hand"
}
`, regexp.MustCompile(`(?s)Team already exists\s+—\s+import it.*id\s+` + regexp.QuoteMeta(itoa(team.ID)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps:                    []resource.TestStep{{Config: p.providerBlock() + tt.config, ExpectError: tt.want}},
			})
		})
	}
	after, err := p.client.GetModel(t.Context(), testModel)
	if err != nil || after.ModelSpec != before.ModelSpec {
		t.Errorf("the existing model is now %+v (%v), was %+v", after.ModelSpec, err, before.ModelSpec)
	}
}
