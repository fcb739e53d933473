package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// guideBlock returns the fenced block of docs/deploy-eks.md that holds
// want, as the guide shows it (its list indentation removed).
func guideBlock(t *testing.T, want string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "deploy-eks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(doc), "```")[1:] {
		if !strings.Contains(part, want) {
			continue
		}
		_, body, _ := strings.Cut(part, "\n") // the fence's language
		var lines []string
		for line := range strings.Lines(body) {
			lines = append(lines, strings.TrimPrefix(line, "  "))
		}
		return strings.Join(lines, "")
	}
	t.Fatalf("docs/deploy-eks.md has no block with %q", want)
	return ""
}

// examplePin is examples/eks's required_providers entry for llmplat.
var examplePin = regexp.MustCompile(`(?s)\n    llmplat = \{\n.*?\n    \}`)

// TestProviderMirrorInitialises runs the EKS guide's provider step as
// written: make provider-mirror, then terraform init with exactly the CLI
// configuration the guide shows (its mirror path pointed at the test's
// build), for the llmplat entry of examples/eks's required_providers. The
// guide's dev_overrides block made init ask the registry for
// llmplat/llmplat, which is not published, and fail. The other providers
// of examples/eks come from the public registry, which this machine
// cannot reach, so only llmplat's entry is initialised; the same CLI
// configuration sends them to the registry (its direct block).
func TestProviderMirrorInitialises(t *testing.T) {
	requireTerraform(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("the guide needs make: %v", err)
	}
	mirror := t.TempDir()
	build := exec.Command("make", "--no-print-directory", "provider-mirror", "TF_MIRROR="+mirror)
	build.Dir = ".."
	build.Env = testenv.CleanEnv()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make provider-mirror: %v\n%s", err, out)
	}
	rc := guideBlock(t, "provider_installation")
	if !strings.Contains(rc, "/path/to/llmplat/bin/tf-mirror") {
		t.Fatalf("the guide's CLI configuration no longer names /path/to/llmplat/bin/tf-mirror:\n%s", rc)
	}
	rc = strings.ReplaceAll(rc, "/path/to/llmplat/bin/tf-mirror", mirror)

	main, err := os.ReadFile(filepath.Join("..", "examples", "eks", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	pin := examplePin.FindString(string(main))
	if !strings.Contains(pin, `version = "`) {
		t.Fatalf("examples/eks pins no version of llmplat/llmplat: %q", pin)
	}
	work := t.TempDir()
	config := "terraform {\n  required_providers {" + pin + "\n  }\n}\n"
	for name, body := range map[string]string{"llmplat.tfrc": rc, "main.tf": config} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	init := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), "init", "-input=false", "-no-color")
	init.Dir = work
	init.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+filepath.Join(work, "llmplat.tfrc"), "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
	out, err := init.CombinedOutput()
	if err != nil {
		t.Fatalf("terraform init with the guide's CLI configuration: %v\n%s", err, out)
	}
	lock, err := os.ReadFile(filepath.Join(work, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatalf("terraform init wrote no lock file: %v\n%s", err, out)
	}
	if !strings.Contains(string(lock), `provider "registry.terraform.io/llmplat/llmplat"`) || !strings.Contains(string(lock), `version     = "0.1.0"`) {
		t.Errorf("the lock file does not record llmplat/llmplat 0.1.0:\n%s", lock)
	}
}
