package provider

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

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

// TestAccTeamSelfService: a team created with self-service on and a
// shorter key life has both on the platform; a personal key a member then
// makes in the console is not drift (the plan stays empty, the declared
// key untouched); removing the attributes sets the defaults back (off, 90
// days) in place; a change made outside Terraform is drift the plan
// shows; import reads both.
func TestAccTeamSelfService(t *testing.T) {
	p := startPlatform(t)
	var id int64
	config := func(attrs string) string {
		return p.providerBlock() + fmt.Sprintf(`
resource "llmplat_team" "a" {
  name = "notebooks"
%s}
resource "llmplat_api_key" "k" {
  team_id = llmplat_team.a.id
  name    = "declared"
}
`, attrs)
	}
	on := "  self_service_keys     = true\n  personal_key_max_days = 14\n"
	platformHas := func(wantOn bool, wantDays int) resource.TestCheckFunc {
		return func(*terraform.State) error {
			tm, err := p.client.GetTeam(context.Background(), id)
			if err != nil || tm.SelfServiceKeys != wantOn || tm.PersonalKeyMaxDays != wantDays {
				return fmt.Errorf("the platform has %+v, %v; want self-service %v, %d days", tm, err, wantOn, wantDays)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{
				Config: config(on),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(s *terraform.State) error {
						var err error
						id, err = strconv.ParseInt(s.RootModule().Resources["llmplat_team.a"].Primary.ID, 10, 64)
						return err
					},
					resource.TestCheckResourceAttr("llmplat_team.a", "self_service_keys", "true"),
					resource.TestCheckResourceAttr("llmplat_team.a", "personal_key_max_days", "14"),
					platformHas(true, 14),
				),
			},
			{
				// A member's personal key, made as the console makes it.
				PreConfig: func() {
					in := time.Now().Add(7 * 24 * time.Hour)
					if _, err := p.Admin.CreatePersonalKey(context.Background(), adminwire.CreateKeyRequest{TeamID: id, Name: "personal",
						ExpiresAt: &in}, "llp_member", time.Now()); err != nil {
						t.Fatal(err)
					}
				},
				Config:   config(on),
				PlanOnly: true,
			},
			{
				Config: config(""),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("llmplat_team.a", "self_service_keys", "false"),
					resource.TestCheckResourceAttr("llmplat_team.a", "personal_key_max_days", "90"),
					platformHas(false, 90),
				),
			},
			{
				// Turned on outside Terraform: the plan puts it back.
				PreConfig: func() {
					yes := true
					if _, err := p.client.UpdateTeam(context.Background(), id, adminwire.UpdateTeamRequest{SelfServiceKeys: &yes}); err != nil {
						t.Fatal(err)
					}
				},
				Config:             config(""),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				Config: config(on),
				Check:  platformHas(true, 14),
			},
			{
				ResourceName:      "llmplat_team.a",
				ImportState:       true,
				ImportStateVerify: true,
			},
		},
	})
}

// TestAccTeamSelfServiceInvalidDays: a key life the admin API would refuse
// fails at plan, pointing at the attribute.
func TestAccTeamSelfServiceInvalidDays(t *testing.T) {
	p := startPlatform(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config:      p.providerBlock() + "resource \"llmplat_team\" \"a\" {\n  name = \"a\"\n  personal_key_max_days = 0\n}\n",
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)Value the platform refuses.*personal_key_max_days.*between 1 and 3650`),
		}},
	})
}
