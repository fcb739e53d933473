package provider

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/llmplat/llmplat/runtime/adminwire"
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

// TestAccCreateRacesAnotherApply: another apply creates the same team, or
// the same model, between this apply's plan and its create (the proxy makes
// it just before the create reaches the platform). The create is refused
// with the import hint: the team is not taken into a second state, the
// other apply's model is not overwritten.
func TestAccCreateRacesAnotherApply(t *testing.T) {
	p := startPlatform(t)
	other := adminwire.ModelSpec{ServedName: "other-apply", PromptPriceMicroPerMTok: 7, CompletionPriceMicroPerMTok: 7,
		MaxContextTokens: 2048, MaxOutputTokens: 256}
	tests := []struct {
		name, config string
		// create is the request of this apply's create.
		create func(r *http.Request) bool
		// otherApply makes the resource as the other apply does.
		otherApply func() error
		want       *regexp.Regexp
	}{
		{"team", `
resource "llmplat_team" "t" {
  name = "raced"
}
`, func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == "/admin/teams" },
			func() error { _, _, err := p.client.CreateTeam(context.Background(), "raced"); return err },
			regexp.MustCompile(`(?s)Team already exists\s+—\s+import it.*import block with id\s+=\s+"\d+"`)},
		{"model", `
resource "llmplat_model" "m" {
  name                            = "raced-model"
  served_name                     = "this-apply"
  prompt_price_micro_per_mtok     = 1
  completion_price_micro_per_mtok = 1
  max_context_tokens              = 4096
  max_output_tokens               = 512
}
`, func(r *http.Request) bool {
			return r.Method == http.MethodPut && r.URL.Path == "/admin/models/raced-model"
		},
			func() error { _, _, err := p.client.PutModel(context.Background(), "raced-model", other); return err },
			regexp.MustCompile(`(?s)Model already exists\s+—\s+import it.*import block with id\s+=\s+"raced-model"`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raced := false
			proxy := newFaultProxy(t, p.URL, func(r *http.Request) fault {
				if tt.create(r) && !raced {
					raced = true
					if err := tt.otherApply(); err != nil {
						t.Errorf("the other apply: %v", err)
					}
				}
				return pass
			})
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps:                    []resource.TestStep{{Config: p.providerBlockVia(proxy.URL, "") + tt.config, ExpectError: tt.want}},
			})
			if !raced {
				t.Error("the apply never reached its create")
			}
		})
	}
	if m, err := p.client.GetModel(t.Context(), "raced-model"); err != nil || m.ModelSpec != other {
		t.Errorf("the other apply's model is now %+v (%v), want %+v", m.ModelSpec, err, other)
	}
}
