package provider

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/llmplat/llmplat/runtime/auth"
	"github.com/llmplat/llmplat/runtime/devmode"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/testenv"
)

// TestAccPlatformExample: examples/terraform/main.tf applies against the
// local mode `make run` starts (the same code, in the test), with the
// provider configured from LLMPLAT_ENDPOINT and LLMPLAT_ADMIN_TOKEN; the
// plan after it is empty, and the key it creates streams a completion.
func TestAccPlatformExample(t *testing.T) {
	requireTerraform(t)
	base, token := startDev(t)
	t.Setenv(EnvEndpoint, base)
	t.Setenv(EnvToken, token)
	cfg, err := os.ReadFile(filepath.Join("..", "examples", "terraform", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	config := exampleConfig(string(cfg))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config: config,
			Check: func(s *terraform.State) error {
				secret := s.RootModule().Outputs["search_service_key"].Value.(string)
				body := `{"model":"llama-8b","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+secret)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "data: [DONE]") {
					t.Errorf("the example's key: %d %s", resp.StatusCode, b)
				}
				return nil
			},
		}},
	})
}

// exampleConfig is the example as the test serves it: the test serves
// the provider itself, so the example's required_providers block, which
// names its registry address, is left out.
func exampleConfig(config string) string {
	if i := strings.Index(config, "terraform {\n"); i >= 0 {
		j := strings.Index(config[i:], "\n}\n")
		config = config[:i] + config[i+j+3:]
	}
	return config
}

// withoutImports deletes the example's import blocks, as its comment tells
// a platform team to against a platform that does not declare the models.
func withoutImports(t *testing.T, config string) string {
	t.Helper()
	n := 0
	for {
		i := strings.Index(config, "\nimport {\n")
		if i < 0 {
			break
		}
		j := strings.Index(config[i:], "\n}\n")
		config = config[:i] + config[i+j+2:]
		n++
	}
	if n != 3 {
		t.Fatalf("the example has %d import blocks, want the three of make run's models", n)
	}
	return config
}

// TestAccPlatformExampleOnAFreshPlatform: examples/terraform/main.tf,
// its import blocks deleted as it says, applies on a platform that
// declares nothing yet (a fresh deployment), and the plan after it is
// empty. A key's allowlist naming a model of the same apply by name was
// refused at plan ("Model not declared").
func TestAccPlatformExampleOnAFreshPlatform(t *testing.T) {
	requireTerraform(t)
	token, err := auth.GenerateAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	pt := platformtest.Start(t, platformtest.Options{AdminToken: token})
	t.Setenv(EnvEndpoint, pt.URL)
	t.Setenv(EnvToken, token)
	cfg, err := os.ReadFile(filepath.Join("..", "examples", "terraform", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []resource.TestStep{{
			Config: withoutImports(t, exampleConfig(string(cfg))),
			Check:  resource.TestCheckResourceAttr("llmplat_api_key.search_service", "model_allowlist.0", "llama-8b"),
		}},
	})
}

// startDev runs the local mode and returns its gateway's base URL and
// admin token, as it prints them.
func startDev(t *testing.T) (base, token string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- devmode.Run(ctx, devmode.Config{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", TimeScale: 50, Stdout: out})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("local mode: %v", err)
		}
	})
	for deadline := time.Now().Add(2 * time.Minute); base == "" || token == ""; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("local mode ended before it was ready: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("local mode not ready:\n%s", out.String())
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if v, ok := strings.CutPrefix(l, "OPENAI_BASE_URL="); ok {
				base = strings.TrimSuffix(v, "/v1")
			}
			if v, ok := strings.CutPrefix(l, "LLMPLAT_ADMIN_TOKEN="); ok {
				token = v
			}
		}
	}
	return base, token
}
