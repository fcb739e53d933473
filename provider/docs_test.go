package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
)

var updateDocs = flag.Bool("update", false, "rewrite the provider's docs/ with tfplugindocs (make generate)")

// providerAddress is the provider's registry address, as configurations
// name it in required_providers.
const providerAddress = "registry.terraform.io/llmplat/llmplat"

// TestDocsAreCurrent: docs/ is what tfplugindocs (pinned in tools/go.mod)
// generates from the provider's schemas and the examples; -update (make
// generate) rewrites it. The schemas come from the real terraform, serving
// the provider from this process, so nothing is downloaded. Every
// attribute, block and schema has a Markdown description.
func TestDocsAreCurrent(t *testing.T) {
	requireTerraform(t)
	schemaJSON := providersSchema(t)
	checkDescriptions(t, schemaJSON)

	site := t.TempDir()
	examples, err := filepath.Abs(filepath.Join("..", "examples", "provider"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(examples, filepath.Join(site, "examples")); err != nil {
		t.Fatal(err)
	}
	schemaFile := filepath.Join(site, "schema.json")
	if err := os.WriteFile(schemaFile, schemaJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	gen := exec.Command("go", "tool", "tfplugindocs", "generate", "-provider-name", "llmplat",
		"-provider-dir", site, "-providers-schema", schemaFile, "-rendered-website-dir", "docs")
	gen.Dir = "tools"
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("tfplugindocs generate: %v\n%s", err, out)
	}
	want := readTree(t, filepath.Join(site, "docs"))
	if *updateDocs {
		if err := os.RemoveAll("docs"); err != nil {
			t.Fatal(err)
		}
		for name, b := range want {
			p := filepath.Join("docs", name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	have := readTree(t, "docs")
	for name := range have {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/%s is not what tfplugindocs generates (make generate)", name)
		}
	}
	for name, b := range want {
		if !bytes.Equal(have[name], b) {
			t.Errorf("docs/%s is stale: run make generate", name)
		}
	}
}

// providersSchema is `terraform providers schema -json` for this
// provider, served by the test process (terraform reattaches to it), with
// the provider under the short name tfplugindocs looks it up by.
func providersSchema(t *testing.T) []byte {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	reattach := make(chan *plugin.ReattachConfig)
	closed := make(chan struct{})
	served := make(chan error, 1) // Serve's result, read after stop
	go func() {
		served <- tf6server.Serve(providerAddress, providerserver.NewProtocol6(New("docs")()),
			tf6server.WithDebug(ctx, reattach, closed), tf6server.WithGoPluginLogger(hclog.NewNullLogger()),
			tf6server.WithLoggingSink(t))
	}()
	t.Cleanup(func() {
		stop()
		<-closed
		if err := <-served; err != nil {
			t.Errorf("serve the provider: %v", err)
		}
	})
	var rc *plugin.ReattachConfig
	select {
	case rc = <-reattach:
	case err := <-served:
		t.Fatalf("serve the provider: %v", err)
	}
	env, err := json.Marshal(map[string]any{providerAddress: map[string]any{
		"Protocol": string(rc.Protocol), "ProtocolVersion": rc.ProtocolVersion, "Pid": rc.Pid, "Test": true,
		"Addr": map[string]string{"Network": rc.Addr.Network(), "String": rc.Addr.String()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := "terraform {\n  required_providers {\n    llmplat = { source = \"llmplat/llmplat\" }\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	terraform := func(args ...string) []byte {
		cmd := exec.Command(os.Getenv("TF_ACC_TERRAFORM_PATH"), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_REATTACH_PROVIDERS="+string(env))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return out
	}
	terraform("init", "-input=false", "-no-color")
	var schemas struct {
		FormatVersion string                     `json:"format_version"`
		Schemas       map[string]json.RawMessage `json:"provider_schemas"`
	}
	if err := json.Unmarshal(terraform("providers", "schema", "-json"), &schemas); err != nil {
		t.Fatal(err)
	}
	s, ok := schemas.Schemas[providerAddress]
	if !ok {
		t.Fatalf("terraform providers schema has no %s", providerAddress)
	}
	out, err := json.Marshal(map[string]any{"format_version": schemas.FormatVersion,
		"provider_schemas": map[string]json.RawMessage{"llmplat": s}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkDescriptions fails the test for a schema, attribute or block
// without a Markdown description.
func checkDescriptions(t *testing.T, schemaJSON []byte) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(schemaJSON, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(where string, block map[string]any)
	walk = func(where string, block map[string]any) {
		if block["description"] == nil || block["description_kind"] != "markdown" {
			t.Errorf("%s has no Markdown description", where)
		}
		attrs, _ := block["attributes"].(map[string]any)
		for name, a := range attrs {
			a := a.(map[string]any)
			if nested, ok := a["nested_type"].(map[string]any); ok {
				walk(where+"."+name, map[string]any{"description": a["description"], "description_kind": a["description_kind"],
					"attributes": nested["attributes"]})
				continue
			}
			walk(where+"."+name, a)
		}
		blocks, _ := block["block_types"].(map[string]any)
		for name, b := range blocks {
			walk(where+"."+name, b.(map[string]any)["block"].(map[string]any))
		}
	}
	provider := doc["provider_schemas"].(map[string]any)["llmplat"].(map[string]any)
	walk("provider", provider["provider"].(map[string]any)["block"].(map[string]any))
	for _, kind := range []string{"resource_schemas", "data_source_schemas", "ephemeral_resource_schemas"} {
		schemas, _ := provider[kind].(map[string]any)
		if len(schemas) == 0 {
			t.Errorf("the provider has no %s", kind)
		}
		for name, s := range schemas {
			walk(name, s.(map[string]any)["block"].(map[string]any))
		}
	}
}

// readTree is every file under dir, by its path relative to dir.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files[rel] = b
		return nil
	})
	if err != nil {
		t.Fatal(fmt.Errorf("read %s: %w", dir, err))
	}
	return files
}
