package provider

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/llmplat/llmplat/runtime/adminwire"
)

// TestAccCredit: a grant adds to the balance once; a second apply and a
// spend in between change nothing; changing a recorded grant is refused
// at plan; destroy leaves the ledger as it was.
func TestAccCredit(t *testing.T) {
	p := startPlatform(t)
	config := func(amount int64, note string) string {
		return p.providerBlock() + fmt.Sprintf(`
resource "llmplat_team" "a" {
  name = "finance"
}
resource "llmplat_credit" "q4" {
  team_id             = llmplat_team.a.id
  amount_microcredits = %d
  note                = %q
}
`, amount, note)
	}
	balance := func(want int64) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			id, _ := strconv.ParseInt(s.RootModule().Resources["llmplat_team.a"].Primary.ID, 10, 64)
			tm, err := p.client.GetTeam(context.Background(), id)
			if err != nil {
				return err
			}
			if tm.BalanceMicrocredits != want {
				return fmt.Errorf("balance %d, want %d", tm.BalanceMicrocredits, want)
			}
			return nil
		}
	}
	var entries int
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		CheckDestroy: func(*terraform.State) error {
			var n int
			if err := p.DB.QueryRowContext(context.Background(), "SELECT count(*) FROM credit_entries").Scan(&n); err != nil {
				return err
			}
			if n != entries {
				return fmt.Errorf("%d ledger credit entries after destroy, want the %d there were", n, entries)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config(7_000_000, "Q4 grant"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("llmplat_credit.q4", "amount_microcredits", "7000000"),
					resource.TestMatchResourceAttr("llmplat_credit.q4", "idempotency_key", regexp.MustCompile(`^terraform-[0-9a-f]{32}$`)),
					balance(7_000_000),
					func(*terraform.State) error {
						return p.DB.QueryRowContext(context.Background(), "SELECT count(*) FROM credit_entries").Scan(&entries)
					},
				),
			},
			{
				// The same configuration again: nothing to do, nothing granted.
				Config:   config(7_000_000, "Q4 grant"),
				PlanOnly: true,
			},
			{
				Config: config(7_000_000, "Q4 grant"),
				Check:  balance(7_000_000),
			},
			{
				Config:      config(9_000_000, "Q4 grant"),
				ExpectError: regexp.MustCompile(`(?s)A credit grant cannot be changed.*amount_microcredits`),
			},
		},
	})
}

// TestAccCreditZero: a zero grant fails at plan.
func TestAccCreditZero(t *testing.T) {
	p := startPlatform(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config: p.providerBlock() + `
resource "llmplat_credit" "z" {
  team_id             = "1"
  amount_microcredits = 0
}
`,
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)Value the platform refuses.*amount_microcredits.*must be non-zero`),
		}},
	})
}

// TestAccCreditImport: a grant made outside Terraform is imported by its
// ledger entry's id and plans no change when the configuration declares
// its team, amount and note; nothing is granted again. A grant Terraform
// made imports back to the state it had.
func TestAccCreditImport(t *testing.T) {
	p := startPlatform(t)
	team := creditedTeam(t, p, "imported-grants")
	teamID, _ := strconv.ParseInt(team, 10, 64)
	byHand, err := p.client.AddCredit(t.Context(), adminwire.CreditRequest{TeamID: teamID, AmountMicrocredits: 3_000_000,
		IdempotencyKey: "invoice-77", Note: "by hand"})
	if err != nil {
		t.Fatal(err)
	}
	balance := func() int64 {
		tm, err := p.client.GetTeam(t.Context(), teamID)
		if err != nil {
			t.Fatal(err)
		}
		return tm.BalanceMicrocredits
	}
	before := balance()
	grants := fmt.Sprintf(`
resource "llmplat_credit" "by_hand" {
  team_id             = %q
  amount_microcredits = 3000000
  note                = "by hand"
}
resource "llmplat_credit" "tf" {
  team_id             = %q
  amount_microcredits = 2000000
  note                = "made by terraform"
}
`, team, team)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{
				Config: p.providerBlock() + fmt.Sprintf("import {\n  to = llmplat_credit.by_hand\n  id = %q\n}\n", itoa(byHand.ID)) + grants,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("llmplat_credit.by_hand", plancheck.ResourceActionNoop),
					plancheck.ExpectResourceAction("llmplat_credit.tf", plancheck.ResourceActionCreate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("llmplat_credit.by_hand", "id", itoa(byHand.ID)),
					resource.TestCheckResourceAttr("llmplat_credit.by_hand", "idempotency_key", "invoice-77"),
					resource.TestCheckResourceAttr("llmplat_credit.by_hand", "created_at", byHand.CreatedAt.UTC().Format(time.RFC3339)),
					func(*terraform.State) error {
						if got := balance(); got != before+2_000_000 {
							return fmt.Errorf("balance %d after importing one grant and making another of 2000000, want %d", got, before+2_000_000)
						}
						return nil
					},
				),
			},
			{ResourceName: "llmplat_credit.tf", ImportState: true, ImportStateVerify: true, Config: p.providerBlock() + grants},
			{ResourceName: "llmplat_credit.tf", ImportState: true, ImportStateId: "999999", Config: p.providerBlock() + grants,
				ExpectError: regexp.MustCompile(`Cannot import non-existent remote object`)},
		},
	})
}
