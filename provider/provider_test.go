package provider

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/llmplat/llmplat/runtime/adminclient"
	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestMain runs the acceptance tests with the real terraform on the PATH,
// never a downloaded one, and never skipped for want of TF_ACC: make test
// runs them. Terraform reads a CLI config of the tests' own and does not
// phone home.
func TestMain(m *testing.M) {
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		if p, err := exec.LookPath("terraform"); err == nil {
			os.Setenv("TF_ACC_TERRAFORM_PATH", p)
		}
	}
	os.Setenv("TF_ACC", "1")
	os.Setenv("CHECKPOINT_DISABLE", "1")
	cli, err := filepath.Abs(filepath.Join("testdata", "terraform.rc"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TF_CLI_CONFIG_FILE", cli)
	testenv.Main(m)
}

// requireTerraform fails (CI) or skips the test without a terraform.
func requireTerraform(t *testing.T) {
	t.Helper()
	p := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if _, err := os.Stat(p); p == "" || err != nil {
		testenv.Missing(t, "terraform", "no terraform binary on the PATH or in TF_ACC_TERRAFORM_PATH", "install Terraform 1.11 or later")
	}
}

// platform is the whole platform platformtest.Start builds (the
// production wiring of the gateway, its admin API and an orchestrator
// replica, on real PostgreSQL and Redis), accepting token as the admin
// credential, with one simulated engine serving testModel through a node
// agent.
type platform struct {
	*platformtest.Platform
	token  string
	client *adminclient.Client
	engine string // the simulated engine's base URL
}

// testModel is the model the platform under test serves.
const testModel = "llama-8b"

// engineNode is the node id of the agent beside the platform's engine.
const engineNode = "tf-engine"

func startPlatform(t *testing.T) *platform {
	t.Helper()
	requireTerraform(t)
	token, err := auth.GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	pt := platformtest.Start(t, platformtest.Options{AdminToken: token})
	pt.Model(testModel, testModel)
	node := pt.StartNode(engineNode, testModel, enginesim.Config{TimeScale: 50, ServedModelName: testModel, Seed: 3},
		enginesim.DefaultMaxNumSeqs)
	client, err := adminclient.NewClient(pt.URL, token, &http.Client{})
	if err != nil {
		t.Fatal(err)
	}
	return &platform{Platform: pt, token: token, client: client, engine: node.URL}
}

// completeMaxTokens is the max_tokens complete asks for.
const completeMaxTokens = 8

// complete streams a short chat completion with secret through the
// gateway and returns the HTTP status, having read the whole answer.
func (p *platform) complete(t *testing.T, secret string) int {
	t.Helper()
	code, b := platformtest.StreamChat(t, p.URL, secret, testModel, completeMaxTokens)
	if code == http.StatusOK && !strings.Contains(string(b), "data: [DONE]") {
		t.Fatalf("a 200 stream without its end: %s", b)
	}
	return code
}

// factories serve the provider in the test process to the real terraform.
func factories() map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"llmplat": providerserver.NewProtocol6WithError(New("test")()),
	}
}

// providerBlock configures the provider for p.
func (p *platform) providerBlock() string {
	return providerBlockAt(p.URL, p.token, "")
}
