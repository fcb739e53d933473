package provider

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// TestAccTeam: create, rename in place (same id), import by id, a credit
// granted and spent outside Terraform causes no diff, and destroy keeps
// the team on the platform.
func TestAccTeam(t *testing.T) {
	p := startPlatform(t)
	var id string
	config := func(name string) string {
		return p.providerBlock() + fmt.Sprintf("resource \"llmplat_team\" \"a\" {\n  name = %q\n}\n", name)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		CheckDestroy: func(*terraform.State) error {
			// Teams are kept for their ledger: still there after destroy.
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil {
				return err
			}
			if _, err := p.client.GetTeam(context.Background(), n); err != nil {
				return fmt.Errorf("the team is gone from the platform: %w", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config("research"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("llmplat_team.a", "name", "research"),
					resource.TestCheckResourceAttr("llmplat_team.a", "balance_microcredits", "0"),
					func(s *terraform.State) error {
						id = s.RootModule().Resources["llmplat_team.a"].Primary.ID
						n, _ := strconv.ParseInt(id, 10, 64)
						t, err := p.client.GetTeam(context.Background(), n)
						if err != nil || t.Name != "research" {
							return fmt.Errorf("the platform has %+v, %v", t, err)
						}
						return nil
					},
				),
			},
			{
				// Credit granted outside Terraform: refresh reads the new
				// balance, and the plan stays empty.
				PreConfig: func() {
					n, _ := strconv.ParseInt(id, 10, 64)
					if _, err := p.client.AddCredit(context.Background(), adminwire.CreditRequest{TeamID: n, AmountMicrocredits: 5_000_000,
						IdempotencyKey: "outside", Note: "outside"}); err != nil {
						t.Fatal(err)
					}
				},
				Config:   config("research"),
				PlanOnly: true,
			},
			{
				Config: config("research-ml"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("llmplat_team.a", "name", "research-ml"),
					resource.TestCheckResourceAttr("llmplat_team.a", "balance_microcredits", "5000000"),
					resource.TestCheckResourceAttr("llmplat_team.a", "available_microcredits", "5000000"),
					func(s *terraform.State) error {
						if got := s.RootModule().Resources["llmplat_team.a"].Primary.ID; got != id {
							return fmt.Errorf("renaming changed the id from %s to %s", id, got)
						}
						return nil
					},
				),
			},
			{
				ResourceName:      "llmplat_team.a",
				ImportState:       true,
				ImportStateVerify: true,
			},
		},
	})
}

// TestAccTeamInvalidName: a name the admin API would refuse fails at plan,
// pointing at the attribute.
func TestAccTeamInvalidName(t *testing.T) {
	p := startPlatform(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config:      p.providerBlock() + "resource \"llmplat_team\" \"a\" {\n  name = \"has space\"\n}\n",
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)Value the platform refuses.*with llmplat_team.a,.*name = "has space".*1 to 64 letters`),
		}},
	})
}
