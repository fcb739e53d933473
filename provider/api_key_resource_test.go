package provider

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/llmplat/llmplat/runtime/credential"
)

// keyConfig is a team, a credit and a key with rpm, max_tokens and
// rotation.
func keyConfig(p *platform, rpm, maxTokens int, rotation string) string {
	return p.providerBlock() + fmt.Sprintf(`
resource "llmplat_team" "t" {
  name = "apps"
}
resource "llmplat_credit" "c" {
  team_id             = llmplat_team.t.id
  amount_microcredits = 100000000
}
resource "llmplat_api_key" "k" {
  team_id         = llmplat_team.t.id
  name            = "ci"
  model_allowlist = [%q]
  rpm             = %d
  max_streams     = 4
  max_tokens      = %d
  expires_at      = %q
  rotation        = %q
}
`, testModel, rpm, maxTokens, time.Now().Add(90*24*time.Hour).UTC().Truncate(time.Hour).Format(time.RFC3339), rotation)
}

// TestAccAPIKey: a key made by Terraform streams a completion, its
// reservation clamped to the key's max_tokens; lowering its rpm in place
// is enforced on the next request, with the same id and secret; changing
// rotation gives a new secret under the same id and the old one is
// refused; import by id; max_tokens changed in place, then removed, holds
// the next request's reservation to it, then to the client's ask; destroy
// revokes.
func TestAccAPIKey(t *testing.T) {
	p := startPlatform(t)
	var id, secret string
	attr := func(s *terraform.State, a string) string {
		return s.RootModule().Resources["llmplat_api_key.k"].Primary.Attributes[a]
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		CheckDestroy: func(*terraform.State) error {
			if code := p.complete(t, secret); code != http.StatusUnauthorized {
				return fmt.Errorf("the destroyed key's secret answers %d, want 401", code)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: keyConfig(p, 100, 4, "r1"),
				Check: func(s *terraform.State) error {
					id, secret = attr(s, "id"), attr(s, "secret")
					if !credential.LooksLikeKey(secret) || attr(s, "prefix") != secret[:12] || attr(s, "max_tokens") != "4" {
						return fmt.Errorf("secret %q, prefix %q, max_tokens %q", secret, attr(s, "prefix"), attr(s, "max_tokens"))
					}
					if code := p.complete(t, secret); code != http.StatusOK {
						return fmt.Errorf("a completion with the new key answered %d", code)
					}
					return p.checkReserved(t, id, 4)
				},
			},
			{
				// rpm 1: the request of the check above already used the
				// minute's one, so the next is refused at once.
				Config: keyConfig(p, 1, 4, "r1"),
				Check: func(s *terraform.State) error {
					if attr(s, "id") != id || attr(s, "secret") != secret {
						return fmt.Errorf("a limit change replaced the key or its secret")
					}
					if code := p.complete(t, secret); code != http.StatusTooManyRequests {
						return fmt.Errorf("after rpm = 1 and a request this minute, a request answered %d, want 429", code)
					}
					return nil
				},
			},
			{
				Config: keyConfig(p, 1000, 6, "r2"),
				Check: func(s *terraform.State) error {
					newSecret := attr(s, "secret")
					if attr(s, "id") != id || newSecret == secret || !credential.LooksLikeKey(newSecret) {
						return fmt.Errorf("rotation: id %s (was %s), secret changed %v", attr(s, "id"), id, newSecret != secret)
					}
					if code := p.complete(t, secret); code != http.StatusUnauthorized {
						return fmt.Errorf("the rotated-out secret answers %d, want 401", code)
					}
					if code := p.complete(t, newSecret); code != http.StatusOK {
						return fmt.Errorf("the new secret answers %d", code)
					}
					secret = newSecret
					return p.checkReserved(t, id, 6)
				},
			},
			{
				ResourceName:            "llmplat_api_key.k",
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"secret", "rotation"},
			},
			{
				// max_tokens 0 removes the cap: the request's own 8.
				Config: keyConfig(p, 1000, 0, "r2"),
				Check: func(s *terraform.State) error {
					if attr(s, "id") != id || attr(s, "secret") != secret || attr(s, "max_tokens") != "0" {
						return fmt.Errorf("removing max_tokens: id %s (was %s), secret kept %v, max_tokens %q",
							attr(s, "id"), id, attr(s, "secret") == secret, attr(s, "max_tokens"))
					}
					if code := p.complete(t, secret); code != http.StatusOK {
						return fmt.Errorf("a completion without the cap answered %d", code)
					}
					return p.checkReserved(t, id, completeMaxTokens)
				},
			},
		},
	})
}

// TestAccAPIKeyWriteOnly: a key whose secret is minted by the ephemeral
// llmplat_key_material and given write-only is absent from the state file,
// and still works; bumping secret_wo_version rotates to the given secret.
func TestAccAPIKeyWriteOnly(t *testing.T) {
	p := startPlatform(t)
	mint := func() string {
		k, err := credential.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		return k.Secret
	}
	first, second := mint(), mint()
	// The test's own folder for terraform's working directories, so the
	// state file can be read as it is on disk.
	work := t.TempDir()
	t.Setenv("TF_ACC_TEMP_DIR", work)
	config := func(secret string, version int) string {
		return p.providerBlock() + fmt.Sprintf(`
resource "llmplat_team" "t" {
  name = "batch"
}
resource "llmplat_credit" "c" {
  team_id             = llmplat_team.t.id
  amount_microcredits = 100000000
}
resource "llmplat_api_key" "k" {
  team_id           = llmplat_team.t.id
  secret_wo         = %q
  secret_wo_version = %d
}
ephemeral "llmplat_key_material" "m" {}
resource "llmplat_api_key" "minted" {
  team_id           = llmplat_team.t.id
  secret_wo         = ephemeral.llmplat_key_material.m.secret
  secret_wo_version = 1
}
`, secret, version)
	}
	noSecrets := func(secrets ...string) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			var files []string
			_ = filepath.WalkDir(work, func(path string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && d.Name() == "terraform.tfstate" {
					files = append(files, path)
				}
				return nil
			})
			if len(files) == 0 {
				return fmt.Errorf("no state file found to read")
			}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					continue
				}
				for _, sec := range secrets {
					if strings.Contains(string(b), sec) {
						return fmt.Errorf("the state file %s holds a write-only secret", f)
					}
				}
				// Any whole key secret in the state is a leak.
				if regexp.MustCompile(`llp_[0-9A-Za-z]{43}`).Match(b) {
					return fmt.Errorf("the state file %s holds a key secret", f)
				}
			}
			for _, r := range []string{"llmplat_api_key.k", "llmplat_api_key.minted"} {
				if v, ok := s.RootModule().Resources[r].Primary.Attributes["secret"]; ok && v != "" {
					return fmt.Errorf("%s has secret %q in state", r, v)
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{
				Config: config(first, 1),
				Check: resource.ComposeAggregateTestCheckFunc(noSecrets(first),
					resource.TestCheckResourceAttr("llmplat_api_key.k", "prefix", first[:12]),
					resource.TestMatchResourceAttr("llmplat_api_key.minted", "prefix", regexp.MustCompile(`^llp_[0-9A-Za-z]{8}$`)),
					func(*terraform.State) error {
						if code := p.complete(t, first); code != http.StatusOK {
							return fmt.Errorf("the write-only secret answers %d", code)
						}
						return nil
					}),
			},
			{
				// Another run mints other key material: nothing changes.
				Config:   config(first, 1),
				PlanOnly: true,
			},
			{
				Config: config(second, 2),
				Check: resource.ComposeAggregateTestCheckFunc(noSecrets(first, second),
					resource.TestCheckResourceAttr("llmplat_api_key.k", "prefix", second[:12]),
					func(*terraform.State) error {
						if code := p.complete(t, first); code != http.StatusUnauthorized {
							return fmt.Errorf("the old secret answers %d after the rotation, want 401", code)
						}
						if code := p.complete(t, second); code != http.StatusOK {
							return fmt.Errorf("the new secret answers %d", code)
						}
						return nil
					}),
			},
		},
	})
}

// TestAccAPIKeyInvalid: limits below zero, an expiry in the past and a
// malformed write-only secret fail at plan, naming the attribute.
func TestAccAPIKeyInvalid(t *testing.T) {
	p := startPlatform(t)
	for _, tc := range []struct{ body, want string }{
		{`rpm = -1`, `(?s)Value the platform refuses.*rpm.*rpm must be between 0 \(unlimited\)`},
		{`max_tokens = -1`, `(?s)Value the platform refuses.*max_tokens.*max_tokens must be between 0 \(unlimited\)`},
		{`expires_at = "2001-01-01T00:00:00Z"`, `(?s)expires_at in the past`},
		{`expires_at = "tomorrow"`, `(?s)Invalid RFC3339 String Value.*expires_at`},
		{`secret_wo = "sk-123"`, `(?s)Invalid key secret.*secret_wo`},
	} {
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: factories(),
			Steps: []resource.TestStep{{
				Config:      p.providerBlock() + "resource \"llmplat_api_key\" \"k\" {\n  team_id = \"1\"\n  " + tc.body + "\n}\n",
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(tc.want),
			}},
		})
	}
}

// checkReserved fails unless the key with id's latest request reserved
// want output tokens: what the gateway sent the engine as max_tokens.
func (p *platform) checkReserved(t *testing.T, id string, want int64) error {
	t.Helper()
	var got int64
	err := p.DB.QueryRowContext(t.Context(),
		"SELECT max_output_tokens FROM usage_ledger WHERE key_id = $1 ORDER BY id DESC LIMIT 1", id).Scan(&got)
	if err != nil {
		return fmt.Errorf("read the key's last reservation: %w", err)
	}
	if got != want {
		return fmt.Errorf("the key's last request reserved %d output tokens, want %d", got, want)
	}
	return nil
}

// TestAccAPIKeyRotatedOutsideTerraform: a key rotated outside Terraform
// (the admin API, the console) leaves the state's secret refused; the
// next plan sees it from the refreshed prefix and plans a rotation, and
// the apply leaves a secret in state that works. Before, the plan said
// "No changes" while the state's secret got 401.
func TestAccAPIKeyRotatedOutsideTerraform(t *testing.T) {
	p := startPlatform(t)
	var id, secret, outside string
	attr := func(s *terraform.State, a string) string {
		return s.RootModule().Resources["llmplat_api_key.k"].Primary.Attributes[a]
	}
	cfg := keyConfig(p, 100, 4, "r1")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check: func(s *terraform.State) error {
					id, secret = attr(s, "id"), attr(s, "secret")
					return nil
				},
			},
			{
				PreConfig: func() {
					n, ok := parseIDString(id)
					if !ok {
						t.Fatalf("key id %q", id)
					}
					rk, err := p.client.RotateKey(t.Context(), n)
					if err != nil {
						t.Fatal(err)
					}
					outside = rk.Secret
					if code := p.complete(t, secret); code != http.StatusUnauthorized {
						t.Fatalf("the state's secret after a rotation outside Terraform answers %d, want 401", code)
					}
				},
				Config:             cfg,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				Config: cfg,
				Check: func(s *terraform.State) error {
					now := attr(s, "secret")
					if now == secret || now == outside || attr(s, "id") != id {
						return fmt.Errorf("after the apply: id %s, secret the old one %t, the outside one %t", attr(s, "id"), now == secret, now == outside)
					}
					if code := p.complete(t, now); code != http.StatusOK {
						return fmt.Errorf("the state's secret after the apply answers %d", code)
					}
					return nil
				},
			},
			{Config: cfg, PlanOnly: true},
		},
	})
}

// parseIDString reads a resource id as the provider does.
func parseIDString(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}
