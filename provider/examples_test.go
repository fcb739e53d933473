package provider

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccExamples: every example the docs show applies against a platform
// of its own (several make the team "search", which the platform keeps
// after a destroy, and a create of an existing team is refused), and a
// second plan is empty (the testing framework checks it after each apply).
func TestAccExamples(t *testing.T) {
	c := startCluster(t)
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
			provider := startPlatform(t).providerBlockFor(c)
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps:                    []resource.TestStep{{Config: provider + string(b)}},
			})
		})
	}
}
