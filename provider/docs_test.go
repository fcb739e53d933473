package provider

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

var updateDocs = flag.Bool("update", false, "rewrite the provider's docs/ from its schemas")

// TestDocsAreCurrent: docs/ (the registry's layout) is what the schemas
// and the examples say; `go test ./provider/ -run TestDocsAreCurrent
// -update` rewrites it. Every attribute has a description.
func TestDocsAreCurrent(t *testing.T) {
	server := providerserver.NewProtocol6(New("docs")())()
	resp, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Fatalf("schema: %s: %s", d.Summary, d.Detail)
	}
	want := map[string][]byte{"index.md": page(t, "llmplat Provider", "provider", "", resp.Provider)}
	for _, kind := range []struct {
		dir, example string
		schemas      map[string]*tfprotov6.Schema
	}{
		{"resources", "resource.tf", resp.ResourceSchemas},
		{"data-sources", "data-source.tf", resp.DataSourceSchemas},
		{"ephemeral-resources", "ephemeral-resource.tf", resp.EphemeralResourceSchemas},
	} {
		for name, s := range kind.schemas {
			short := strings.TrimPrefix(name, "llmplat_")
			ex := filepath.Join("..", "examples", "provider", kind.dir, name, kind.example)
			want[filepath.Join(kind.dir, short+".md")] = page(t, name, kind.dir, ex, s)
		}
	}
	if *updateDocs {
		if err := os.RemoveAll("docs"); err != nil {
			t.Fatal(err)
		}
		for name, b := range want {
			if err := os.MkdirAll(filepath.Dir(filepath.Join("docs", name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("docs", name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var have []string
	_ = filepath.WalkDir("docs", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel("docs", p)
			have = append(have, rel)
		}
		return nil
	})
	for _, rel := range have {
		if _, ok := want[rel]; !ok {
			t.Errorf("docs/%s documents nothing the provider has (run with -update)", rel)
		}
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join("docs", name))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("docs/%s is stale: run go test ./provider/ -run TestDocsAreCurrent -update", name)
		}
	}
}

// page renders one schema as a registry page.
func page(t *testing.T, name, kind, example string, s *tfprotov6.Schema) []byte {
	t.Helper()
	var b bytes.Buffer
	sub := map[string]string{"provider": "", "resources": "Resource", "data-sources": "Data Source", "ephemeral-resources": "Ephemeral Resource"}[kind]
	title := name
	if sub != "" {
		title = name + " (" + sub + ")"
	}
	fmt.Fprintf(&b, "---\npage_title: %q\ndescription: |-\n  %s\n---\n\n# %s\n\n%s\n", title,
		strings.ReplaceAll(s.Block.Description, "\n", "\n  "), title, s.Block.Description)
	if kind == "provider" {
		example = filepath.Join("..", "examples", "provider", "provider", "provider.tf")
	}
	if ex, err := os.ReadFile(example); err == nil {
		fmt.Fprintf(&b, "\n## Example Usage\n\n```terraform\n%s```\n", ex)
	} else if kind != "provider" {
		t.Errorf("%s has no example at %s", name, example)
	}
	b.WriteString("\n## Schema\n")
	attributes(t, &b, name, "", s.Block.Attributes, s.Block.BlockTypes)
	return b.Bytes()
}

// attributes lists attrs under Required, Optional and Read-Only, and
// blocks (all optional) under Optional; then each nested schema.
func attributes(t *testing.T, b *bytes.Buffer, owner, prefix string, attrs []*tfprotov6.SchemaAttribute, blocks []*tfprotov6.SchemaNestedBlock) {
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].Name < attrs[j].Name })
	sort.Slice(blocks, func(i, j int) bool { return blocks[i].TypeName < blocks[j].TypeName })
	for _, group := range []struct {
		title string
		in    func(*tfprotov6.SchemaAttribute) bool
	}{
		{"Required", func(a *tfprotov6.SchemaAttribute) bool { return a.Required }},
		{"Optional", func(a *tfprotov6.SchemaAttribute) bool { return a.Optional }},
		{"Read-Only", func(a *tfprotov6.SchemaAttribute) bool { return a.Computed && !a.Optional }},
	} {
		var lines []string
		for _, a := range attrs {
			if !group.in(a) {
				continue
			}
			if strings.TrimSpace(a.Description) == "" {
				t.Errorf("%s: attribute %s%s has no description", owner, prefix, a.Name)
			}
			notes := typeName(a)
			if a.Sensitive {
				notes += ", Sensitive"
			}
			if a.WriteOnly {
				notes += ", Write-only"
			}
			lines = append(lines, fmt.Sprintf("- `%s` (%s) %s", a.Name, notes, a.Description))
		}
		if group.title == "Optional" {
			for _, bl := range blocks {
				if strings.TrimSpace(bl.Block.Description) == "" {
					t.Errorf("%s: block %s%s has no description", owner, prefix, bl.TypeName)
				}
				lines = append(lines, fmt.Sprintf("- `%s` (Block) %s (see [below for nested schema](#nestedblock--%s))",
					bl.TypeName, bl.Block.Description, anchor(prefix+bl.TypeName)))
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(b, "\n### %s%s\n\n%s\n", strings.TrimSuffix(prefix, "."), group.title, strings.Join(lines, "\n"))
		}
	}
	for _, a := range attrs {
		if a.NestedType != nil {
			fmt.Fprintf(b, "\n<a id=\"nestedatt--%s\"></a>\n### Nested Schema for `%s%s`\n", anchor(prefix+a.Name), prefix, a.Name)
			attributes(t, b, owner, prefix+a.Name+".", a.NestedType.Attributes, nil)
		}
	}
	for _, bl := range blocks {
		fmt.Fprintf(b, "\n<a id=\"nestedblock--%s\"></a>\n### Nested Schema for `%s%s`\n", anchor(prefix+bl.TypeName), prefix, bl.TypeName)
		attributes(t, b, owner, prefix+bl.TypeName+".", bl.Block.Attributes, bl.Block.BlockTypes)
	}
}

// anchor is a nested schema's anchor: its path with -- for the dots.
func anchor(p string) string { return strings.ReplaceAll(p, ".", "--") }

// typeName is an attribute's type in words.
func typeName(a *tfprotov6.SchemaAttribute) string {
	if a.NestedType != nil {
		if a.NestedType.Nesting == tfprotov6.SchemaObjectNestingModeSingle {
			return "Attributes"
		}
		return "Attributes List"
	}
	switch {
	case a.Type.Is(tftypes.String):
		return "String"
	case a.Type.Is(tftypes.Number):
		return "Number"
	case a.Type.Is(tftypes.Bool):
		return "Boolean"
	case a.Type.Is(tftypes.List{}):
		return "List of String"
	case a.Type.Is(tftypes.Set{}):
		return "Set of String"
	case a.Type.Is(tftypes.Map{}):
		return "Map of String"
	}
	return a.Type.String()
}
