package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// TestAccModel: declare, reprice in place, import by name, destroy removes
// it from the platform.
func TestAccModel(t *testing.T) {
	p := startPlatform(t)
	config := func(price int) string {
		return p.providerBlock() + fmt.Sprintf(`
resource "llmplat_model" "m" {
  name                            = "mistral-7b"
  served_name                     = "mistralai/Mistral-7B-Instruct-v0.3"
  prompt_price_micro_per_mtok     = %d
  completion_price_micro_per_mtok = 400000
  max_context_tokens              = 16384
  max_output_tokens               = 2048
}
`, price)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		CheckDestroy: func(*terraform.State) error {
			if _, err := p.client.GetModel(context.Background(), "mistral-7b"); !notFound(err) {
				return fmt.Errorf("the destroyed model: %v, want not found", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config(100000),
				Check: func(*terraform.State) error {
					m, err := p.client.GetModel(context.Background(), "mistral-7b")
					if err != nil || m.PromptPriceMicroPerMTok != 100000 || m.MaxContextTokens != 16384 {
						return fmt.Errorf("declared %+v, %v", m, err)
					}
					return nil
				},
			},
			{
				Config: config(150000),
				Check: func(*terraform.State) error {
					m, err := p.client.GetModel(context.Background(), "mistral-7b")
					if err != nil || m.PromptPriceMicroPerMTok != 150000 {
						return fmt.Errorf("repriced %+v, %v", m, err)
					}
					return nil
				},
			},
			{ResourceName: "llmplat_model.m", ImportState: true, ImportStateVerify: true},
		},
	})
}
