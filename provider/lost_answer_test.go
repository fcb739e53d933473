package provider

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/credential"
)

// TestAccLostCreateAnswer: the answer to the first create of a team, a
// model, a key and a node token is lost after the platform committed (a
// proxy answers 502); the provider's retry replays the create, which is not
// taken for a resource made outside Terraform, and state ends with secrets
// that work: the key streams a completion, the node token verifies for its
// node.
func TestAccLostCreateAnswer(t *testing.T) {
	p := startPlatform(t)
	ws := p.WSURL
	dropped := map[string]bool{}
	isCreate := func(r *http.Request) (string, bool) {
		switch {
		case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/admin/models/"):
			return "model", true
		case r.Method != http.MethodPost:
			return "", false
		case r.URL.Path == "/admin/teams":
			return "team", true
		case r.URL.Path == "/admin/keys":
			return "key", true
		case strings.HasPrefix(r.URL.Path, "/admin/nodes/") && strings.HasSuffix(r.URL.Path, "/tokens"):
			return "node token", true
		}
		return "", false
	}
	proxy := newFaultProxy(t, p.URL, func(r *http.Request) fault {
		what, ok := isCreate(r)
		if !ok || dropped[what] {
			return pass
		}
		dropped[what] = true
		return dropAnswer
	})
	config := proxyConfig(p, proxy.URL, ws)
	attr := func(s *terraform.State, res, a string) string {
		return s.RootModule().Resources[res].Primary.Attributes[a]
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config: config,
			Check: func(s *terraform.State) error {
				if got := proxy.count(dropAnswer); got != 4 {
					return fmt.Errorf("the proxy dropped %d create answers, want 4 (a team's, a model's, a key's and a node token's)", got)
				}
				secret := attr(s, "llmplat_api_key.k", "secret")
				if !credential.LooksLikeKey(secret) {
					return fmt.Errorf("the key's secret in state is %q after a lost answer", secret)
				}
				if code := p.complete(t, secret); code != http.StatusOK {
					return fmt.Errorf("a completion with the key's secret from state answered %d", code)
				}
				token := attr(s, "llmplat_onprem_node.n", "token")
				if err := admin.NewSQLNodeTokens(p.DB).Verify(t.Context(), "lost-answer-1", token); err != nil {
					return fmt.Errorf("the node token in state (%d characters) does not verify: %w", len(token), err)
				}
				return nil
			},
		}},
	})
}

// proxyConfig is a team with credit and a key, a model and an on-prem node, through
// the provider configured for the proxy at base.
func proxyConfig(p *platform, base, wsURL string) string {
	return p.providerBlockVia(base, "") + fmt.Sprintf(`
resource "llmplat_team" "t" {
  name = "lost-answers"
}
resource "llmplat_credit" "c" {
  team_id             = llmplat_team.t.id
  amount_microcredits = 100000000
}
resource "llmplat_api_key" "k" {
  team_id = llmplat_team.t.id
  name    = "lost-answer"
}
resource "llmplat_model" "m" {
  name                            = "lost-answer-model"
  served_name                     = "lost-answer-model"
  prompt_price_micro_per_mtok     = 100000
  completion_price_micro_per_mtok = 400000
  max_context_tokens              = 8192
  max_output_tokens               = 1024
}
resource "llmplat_onprem_node" "n" {
  node_id          = "lost-answer-1"
  orchestrator_url = %q
  models = [{
    name            = %q
    served_name     = %q
    max_num_seqs    = 8
    max_model_len   = 8192
    kv_cache_tokens = 200000
  }]
}
`, wsURL, testModel, testModel)
}
