package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// envPluginMirror names a filesystem mirror holding
// registry.terraform.io/hashicorp/aws, as for make tfcheck.
const envPluginMirror = "TF_PLUGIN_MIRROR"

// awsMirror finds the filesystem mirror of hashicorp/aws the way make
// tfcheck does: TF_PLUGIN_MIRROR, or a folder named tf-plugins at most
// three levels under the root.
func awsMirror(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv(envPluginMirror)}
	for _, pattern := range []string{"/tf-plugins", "/*/tf-plugins", "/*/*/tf-plugins"} {
		m, _ := filepath.Glob(pattern)
		candidates = append(candidates, m...)
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(c, "registry.terraform.io", "hashicorp", "aws")); err == nil && fi.IsDir() {
			return c
		}
	}
	testenv.Missing(t, "hashicorp/aws mirror", "no filesystem mirror of hashicorp/aws",
		"set "+envPluginMirror+" to a folder holding registry.terraform.io/hashicorp/aws")
	return ""
}

// noSecretInPlan fails when the plan, as terraform shows it in JSON, holds
// a key secret anywhere.
type noSecretInPlan struct{}

func (noSecretInPlan) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	b, err := json.Marshal(req.Plan)
	if err != nil {
		resp.Error = err
		return
	}
	if regexp.MustCompile(`llp_[0-9A-Za-z]{43}`).Match(b) {
		resp.Error = fmt.Errorf("the plan holds a key secret")
	}
}

// TestAccSecretHandoffExample: examples/secret-handoff plans with the real
// terraform, the real hashicorp/aws provider from the filesystem mirror and
// the platform: the key and the Secrets Manager secret version are created
// together from the same write-only secret version, and the plan holds no
// secret. (Applying needs an AWS account: the plan is as far as it goes
// offline.)
func TestAccSecretHandoffExample(t *testing.T) {
	p := startPlatform(t)
	mirror := awsMirror(t)
	rc := filepath.Join(t.TempDir(), "terraform.rc")
	if err := os.WriteFile(rc, fmt.Appendf(nil, "provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [\"registry.terraform.io/hashicorp/*\"]\n  }\n}\n", mirror), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TF_CLI_CONFIG_FILE", rc)
	t.Setenv(EnvEndpoint, p.URL)
	t.Setenv(EnvToken, p.token)
	b, err := os.ReadFile(filepath.Join("..", "examples", "secret-handoff", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	// The test serves llmplat itself and names aws's version: the
	// example's terraform block is left out. The aws provider is
	// configured to plan without an account.
	config := string(b)
	if i := strings.Index(config, "terraform {\n"); i >= 0 {
		j := strings.Index(config[i:], "\n}\n")
		config = config[:i] + config[i+j+3:]
	}
	config += `
provider "aws" {
  region                      = "eu-west-1"
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
}
`
	one := knownvalue.Int64Exact(1)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		ExternalProviders: map[string]resource.ExternalProvider{
			"aws": {Source: "registry.terraform.io/hashicorp/aws", VersionConstraint: "5.100.0"},
		},
		Steps: []resource.TestStep{{
			Config:             config,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction("llmplat_api_key.batch", plancheck.ResourceActionCreate),
				plancheck.ExpectResourceAction("aws_secretsmanager_secret_version.batch_key", plancheck.ResourceActionCreate),
				plancheck.ExpectKnownValue("llmplat_api_key.batch", tfjsonpath.New("secret_wo_version"), one),
				plancheck.ExpectKnownValue("aws_secretsmanager_secret_version.batch_key", tfjsonpath.New("secret_string_wo_version"), one),
				noSecretInPlan{},
			}},
		}},
	})
}
