package provider

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccExamples: every example the docs show applies against the
// platform, and a second plan is empty (the testing framework checks it
// after each apply).
func TestAccExamples(t *testing.T) {
	p := startPlatform(t)
	c := startCluster(t)
	provider := p.providerBlockFor(c)
	files, err := filepath.Glob(filepath.Join("..", "examples", "provider", "*", "*", "*.tf"))
	if err != nil || len(files) < 8 {
		t.Fatalf("examples %v, %v; want one per resource, data source and ephemeral resource", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(filepath.Dir(f)), func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps:                    []resource.TestStep{{Config: provider + string(b)}},
			})
		})
	}
}
