package provider

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// TestAccAPIKeyPlanNoise: a limit change plans the key's status as it was
// read, not "known after apply", and a key without a rotation line keeps
// its secret's prefix known; a new expires_at plans the status unknown;
// removing the rotation line plans nothing and rotates nothing, putting
// the same value back neither; a new value rotates.
func TestAccAPIKeyPlanNoise(t *testing.T) {
	p := startPlatform(t)
	expires := func(days int) string {
		return time.Now().Add(time.Duration(days) * 24 * time.Hour).UTC().Truncate(time.Hour).Format(time.RFC3339)
	}
	config := func(rpm int, expiresAt, rotation string) string {
		return p.providerBlock() + fmt.Sprintf(`
resource "llmplat_team" "t" {
  name = "ops"
}
resource "llmplat_credit" "c" {
  team_id             = llmplat_team.t.id
  amount_microcredits = 100000000
}
resource "llmplat_api_key" "k" {
  team_id    = llmplat_team.t.id
  name       = "svc"
  rpm        = %d
  expires_at = %q
  %s
}
resource "llmplat_api_key" "plain" {
  team_id = llmplat_team.t.id
  rpm     = %[1]d
}
`, rpm, expiresAt, rotation)
	}
	in30, in60 := expires(30), expires(60)
	var secret string
	attr := func(s *terraform.State, a string) string {
		return s.RootModule().Resources["llmplat_api_key.k"].Primary.Attributes[a]
	}
	sameSecret := func(s *terraform.State) error {
		if got := attr(s, "secret"); got != secret {
			return fmt.Errorf("the secret changed")
		}
		if code := p.complete(t, secret); code != http.StatusOK {
			return fmt.Errorf("the kept secret answers %d", code)
		}
		return nil
	}
	status := tfjsonpath.New("status")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{
				Config: config(100, in30, `rotation = "r1"`),
				Check:  func(s *terraform.State) error { secret = attr(s, "secret"); return nil },
			},
			{
				Config: config(200, in30, `rotation = "r1"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("llmplat_api_key.k", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("llmplat_api_key.k", status, knownvalue.StringExact(adminwire.KeyActive)),
					// A key that never had a rotation line: nothing of its
					// secret is planned to change.
					plancheck.ExpectResourceAction("llmplat_api_key.plain", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("llmplat_api_key.plain", tfjsonpath.New("prefix"), knownvalue.StringRegexp(regexp.MustCompile(`^llp_`))),
					plancheck.ExpectKnownValue("llmplat_api_key.plain", tfjsonpath.New("rotation"), knownvalue.Null()),
				}},
				Check: sameSecret,
			},
			{
				// A new expiry may change the status: unknown until read.
				Config: config(200, in60, `rotation = "r1"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue("llmplat_api_key.k", status),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(sameSecret,
					resource.TestCheckResourceAttr("llmplat_api_key.k", "status", adminwire.KeyActive)),
			},
			{
				// The rotation line removed: an empty plan.
				Config:   config(200, in60, ``),
				PlanOnly: true,
			},
			{
				// Removed along with another change: no rotation.
				Config: config(300, in60, ``),
				Check: resource.ComposeAggregateTestCheckFunc(sameSecret,
					resource.TestCheckResourceAttr("llmplat_api_key.k", "rotation", "r1")),
			},
			{
				// The same value back: still nothing.
				Config:   config(300, in60, `rotation = "r1"`),
				PlanOnly: true,
			},
			{
				Config: config(300, in60, `rotation = "r2"`),
				Check: func(s *terraform.State) error {
					if attr(s, "secret") == secret {
						return fmt.Errorf("a new rotation value kept the secret")
					}
					if code := p.complete(t, secret); code != http.StatusUnauthorized {
						return fmt.Errorf("the rotated-out secret answers %d, want 401", code)
					}
					return nil
				},
			},
		},
	})
}

// grantOutside grants credit to a team outside Terraform when the plan
// check runs: between the plan and its apply.
type grantOutside struct {
	p  *platform
	id *string
}

func (g grantOutside) CheckPlan(ctx context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	n, err := strconv.ParseInt(*g.id, 10, 64)
	if err != nil {
		resp.Error = err
		return
	}
	_, err = g.p.client.AddCredit(ctx, adminwire.CreditRequest{TeamID: n, AmountMicrocredits: 7_000_000,
		IdempotencyKey: "between-plan-and-apply", Note: "outside"})
	resp.Error = err
}

// TestAccTeamRenamePlan: a rename plans the balances as last read, not
// "known after apply"; a credit granted between the plan and its apply
// does not make the apply inconsistent with its plan, and the next
// refresh reads it.
func TestAccTeamRenamePlan(t *testing.T) {
	p := startPlatform(t)
	var id string
	config := func(name string) string {
		return p.providerBlock() + fmt.Sprintf("resource \"llmplat_team\" \"a\" {\n  name = %q\n}\n", name)
	}
	zero := knownvalue.Int64Exact(0)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{
				Config: config("growth"),
				Check: func(s *terraform.State) error {
					id = s.RootModule().Resources["llmplat_team.a"].Primary.ID
					return nil
				},
			},
			{
				Config: config("growth-eu"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("llmplat_team.a", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("llmplat_team.a", tfjsonpath.New("balance_microcredits"), zero),
					plancheck.ExpectKnownValue("llmplat_team.a", tfjsonpath.New("reserved_microcredits"), zero),
					plancheck.ExpectKnownValue("llmplat_team.a", tfjsonpath.New("available_microcredits"), zero),
					grantOutside{p: p, id: &id},
				}},
				Check: resource.TestCheckResourceAttr("llmplat_team.a", "name", "growth-eu"),
			},
			{
				RefreshState: true,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("llmplat_team.a", "balance_microcredits", "7000000"),
					resource.TestCheckResourceAttr("llmplat_team.a", "available_microcredits", "7000000")),
			},
		},
	})
}

// TestAccAPIKeyAllowlistStrict: an allowlisted model the platform does not
// declare fails the plan at the attribute; with strict = false it plans
// (a warning); a model created in the same apply, named by its id, applies.
func TestAccAPIKeyAllowlistStrict(t *testing.T) {
	p := startPlatform(t)
	key := func(allow string) string {
		return fmt.Sprintf(`
resource "llmplat_team" "t" {
  name = "strict"
}
resource "llmplat_api_key" "k" {
  team_id         = llmplat_team.t.id
  model_allowlist = [%s]
}
`, allow)
	}
	lax := fmt.Sprintf("provider \"llmplat\" {\n  endpoint = %q\n  token    = %q\n  strict   = false\n}\n", p.URL, p.token)
	for _, tc := range []struct {
		name, config string
		want         *regexp.Regexp
	}{
		{"strict by default", p.providerBlock() + key(`"no-such-model"`), regexp.MustCompile(`(?s)Model not declared.*model_allowlist.*"no-such-model"`)},
		{"strict = false warns", lax + key(`"no-such-model"`), nil},
		{"declared", p.providerBlock() + key(strconv.Quote(testModel)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps: []resource.TestStep{{
					Config: tc.config, PlanOnly: true, ExpectNonEmptyPlan: true, ExpectError: tc.want,
				}},
			})
		})
	}
	// A model of the same apply, named by its id: the check waits for the
	// apply, which passes, and the plan after it is empty.
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config: p.providerBlock() + `
resource "llmplat_model" "m" {
  name                            = "mistral-7b"
  served_name                     = "mistral-7b"
  prompt_price_micro_per_mtok     = 100000
  completion_price_micro_per_mtok = 400000
  max_context_tokens              = 4096
  max_output_tokens               = 512
}
` + key(`llmplat_model.m.id`),
			Check: resource.TestCheckTypeSetElemAttr("llmplat_api_key.k", "model_allowlist.*", "mistral-7b"),
		}},
	})
}
