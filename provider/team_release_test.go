package provider

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// warningCounter counts, by summary, the warnings the provider's applies
// (destroys included) hand terraform.
type warningCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// containing is how many warnings had a summary containing part.
func (w *warningCounter) containing(part string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for summary, c := range w.counts {
		if strings.Contains(summary, part) {
			n += c
		}
	}
	return n
}

// countingServer is the provider's server with its apply warnings counted.
type countingServer struct {
	tfprotov6.ProviderServer
	warnings *warningCounter
}

func (s countingServer) ApplyResourceChange(ctx context.Context, req *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	resp, err := s.ProviderServer.ApplyResourceChange(ctx, req)
	if resp != nil {
		s.warnings.mu.Lock()
		for _, d := range resp.Diagnostics {
			if d.Severity == tfprotov6.DiagnosticSeverityWarning {
				s.warnings.counts[d.Summary]++
			}
		}
		s.warnings.mu.Unlock()
	}
	return resp, err
}

// countingFactories are factories whose servers count into w.
func countingFactories(w *warningCounter) map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"llmplat": func() (tfprotov6.ProviderServer, error) {
			s, err := providerserver.NewProtocol6WithError(New("test")())()
			return countingServer{ProviderServer: s, warnings: w}, err
		},
	}
}

// releaseTeams is how many teams TestAccTeamDestroyThenApply destroys.
const releaseTeams = 3

// releaseGrant is the credit TestAccTeamDestroyThenApply grants the first
// team.
const releaseGrant = 5_000_000

// TestAccTeamDestroyThenApply: terraform destroy, then terraform apply of
// the same configuration, works: the destroy releases the teams (saying so
// in one warning for all of them, not one each), and the apply takes them
// back with their ids, while the credit, whose grant the ledger kept, is
// not granted twice.
func TestAccTeamDestroyThenApply(t *testing.T) {
	p := startPlatform(t)
	config := p.providerBlock() + fmt.Sprintf(`
resource "llmplat_team" "t" {
  count = %d
  name  = "again-${count.index}"
}
resource "llmplat_credit" "c" {
  team_id             = llmplat_team.t[0].id
  amount_microcredits = %d
}
`, releaseTeams, releaseGrant)
	warnings := &warningCounter{counts: map[string]int{}}
	ids := map[string]string{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: countingFactories(warnings),
		Steps: []resource.TestStep{
			{Config: config, Check: func(s *terraform.State) error {
				for i := range releaseTeams {
					addr := fmt.Sprintf("llmplat_team.t.%d", i)
					ids[addr] = s.RootModule().Resources[addr].Primary.ID
				}
				return nil
			}},
			{Config: config, Destroy: true, Check: func(*terraform.State) error {
				if got := warnings.containing("kept on the platform"); got != 1 {
					return fmt.Errorf("destroying %d teams gave %d warnings that they are kept, want one", releaseTeams, got)
				}
				return nil
			}},
			{Config: config, Check: func(s *terraform.State) error {
				for addr, id := range ids {
					if got := s.RootModule().Resources[addr].Primary.ID; got != id {
						return fmt.Errorf("%s is team %s after destroy and apply, want %s taken back", addr, got, id)
					}
				}
				team, err := p.client.GetTeam(context.Background(), mustID(ids["llmplat_team.t.0"]))
				if err != nil || team.BalanceMicrocredits != releaseGrant || team.ReleasedAt != nil {
					return fmt.Errorf("the first team after destroy and apply = %+v, %v; want held, balance %d (granted once)",
						team, err, releaseGrant)
				}
				return nil
			}},
		},
	})
}

// mustID reads a numeric id kept as a string; 0 when it is not one.
func mustID(s string) int64 {
	var id int64
	_, _ = fmt.Sscan(s, &id)
	return id
}
