package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/llmplat/llmplat/runtime/adminwire"
	"github.com/llmplat/llmplat/runtime/credential"
)

// creditedTeam makes a team with credit for a few completions.
func creditedTeam(t *testing.T, p *platform, name string) string {
	t.Helper()
	team, _, err := p.client.CreateTeam(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.client.AddCredit(t.Context(), adminwire.CreditRequest{TeamID: team.ID, AmountMicrocredits: 100_000_000,
		IdempotencyKey: "test-" + name}); err != nil {
		t.Fatal(err)
	}
	return itoa(team.ID)
}

// activeKeyIDs lists the ids of the team's keys that are not revoked.
func activeKeyIDs(t *testing.T, p *platform, team string) []string {
	t.Helper()
	id, err := strconv.ParseInt(team, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := p.client.ListKeys(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range keys {
		if k.RevokedAt == nil {
			ids = append(ids, itoa(k.ID))
		}
	}
	return ids
}

// TestAccKeyCreateOutlivesItsApply: the platform commits a key's create
// and the apply ends without its answer (the proxy answers 500 after the
// commit, as a terraform killed at that moment would leave it: the key
// exists, its secret is in no state). The next apply ends with exactly one
// active key of that team: the same one, taken over, whose secret in
// state streams a completion, while the secret the first apply sent is
// refused.
func TestAccKeyCreateOutlivesItsApply(t *testing.T) {
	p := startPlatform(t)
	team := creditedTeam(t, p, "killed-apply")
	var lost string // the secret the killed apply sent
	proxy := newFaultProxy(t, p.URL, func(r *http.Request) fault {
		if lost != "" || r.Method != http.MethodPost || r.URL.Path != "/admin/keys" {
			return pass
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read the create: %v", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		var req adminwire.CreateKeyRequest
		if err := json.Unmarshal(b, &req); err != nil || !credential.LooksLikeKey(req.Key) {
			t.Errorf("the create sent no minted secret (%v)", err)
		}
		lost = req.Key
		return processKilled
	})
	config := p.providerBlockVia(proxy.URL, "") + fmt.Sprintf(`
resource "llmplat_api_key" "k" {
  team_id = %q
  name    = "survivor"
  rpm     = 100
}
`, team)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{Config: config, ExpectError: regexp.MustCompile(`API key not created`)},
			{
				Config: config,
				Check: func(s *terraform.State) error {
					if got := proxy.count(processKilled); got != 1 {
						return fmt.Errorf("the proxy failed %d creates after their commit, want 1", got)
					}
					left := activeKeyIDs(t, p, team)
					if len(left) != 1 {
						return fmt.Errorf("after the killed apply and the next, the team has active keys %v; want one", left)
					}
					attrs := s.RootModule().Resources["llmplat_api_key.k"].Primary.Attributes
					if attrs["id"] != left[0] {
						return fmt.Errorf("state holds key %s, the team's active key is %s", attrs["id"], left[0])
					}
					if code := p.complete(t, attrs["secret"]); code != http.StatusOK {
						return fmt.Errorf("a completion with the secret in state answered %d", code)
					}
					if code := p.complete(t, lost); code != http.StatusUnauthorized {
						return fmt.Errorf("a completion with the killed apply's secret answered %d, want 401", code)
					}
					return nil
				},
			},
		},
	})
}

// TestAccKeysSharingANameStayApart: keys of one team with one name are keys
// of their own, never one taking the other over: one declared next to a
// key already in state, and two declared in the same apply. Each has its
// own id, and every secret in state streams a completion.
func TestAccKeysSharingANameStayApart(t *testing.T) {
	p := startPlatform(t)
	team := creditedTeam(t, p, "shared-names")
	key := func(res, name string) string {
		return fmt.Sprintf("resource \"llmplat_api_key\" %q {\n  team_id = %q\n  name    = %q\n}\n", res, team, name)
	}
	apart := func(res ...string) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			var ids []string
			for _, r := range res {
				a := s.RootModule().Resources["llmplat_api_key."+r].Primary.Attributes
				if slices.Contains(ids, a["id"]) {
					return fmt.Errorf("llmplat_api_key.%s has key %s, as another resource does", r, a["id"])
				}
				ids = append(ids, a["id"])
				if code := p.complete(t, a["secret"]); code != http.StatusOK {
					return fmt.Errorf("a completion with llmplat_api_key.%s's secret answered %d", r, code)
				}
			}
			if left := activeKeyIDs(t, p, team); len(left) != len(res) {
				return fmt.Errorf("the team has active keys %v, want %d", left, len(res))
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{Config: p.providerBlock() + key("a", "shared"), Check: apart("a")},
			{Config: p.providerBlock() + key("a", "shared") + key("b", "shared"), Check: apart("a", "b")},
			{Config: p.providerBlock() + key("a", "shared") + key("b", "shared") + key("c", "twin") + key("d", "twin"),
				Check: apart("a", "b", "c", "d")},
		},
	})
}
