package templates_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"gopkg.in/yaml.v3"

	"github.com/llmplat/llmplat/runtime/render"
)

// TestImagesComeFromPublishingRegistries: every image the repository
// deploys comes from a registry its publisher releases to: each container
// `llmplat render` writes for examples/platform.yaml (the same templates
// llmplat_platform_manifests and llmplat_model fill), and each image named
// in the Terraform of modules/ and examples/ (variable defaults, the
// example's images, the provider's examples). A device plugin pinned on
// Docker Hub, where NVIDIA stopped publishing, left GPU nodes without
// nvidia.com/gpu (issue 30).
func TestImagesComeFromPublishingRegistries(t *testing.T) {
	images := map[string][]string{} // image → where it was found
	for img, where := range renderedImages(t) {
		images[img] = append(images[img], where...)
	}
	for img, where := range terraformImages(t) {
		images[img] = append(images[img], where...)
	}
	// The scan must keep seeing the example's images, or it checks nothing.
	for _, field := range imagesFields {
		seen := false
		for _, where := range images {
			for _, w := range where {
				seen = seen || strings.Contains(w, "examples/eks/") && strings.HasSuffix(w, "(images."+field+")")
			}
		}
		if !seen {
			t.Errorf("no image for images.%s found in examples/eks: the scan no longer reads it", field)
		}
	}
	if len(images) < 3 {
		t.Fatalf("found %d images (%v), want at least the engine, platform and device plugin", len(images), images)
	}
	for img, where := range images {
		if err := render.CheckImage(img); err != nil {
			t.Errorf("%v (in %s)", err, strings.Join(where, ", "))
		}
		// The engine by digest wherever a platform's images are given, as
		// `llmplat render` requires: a tag may name another image later.
		for _, w := range where {
			if strings.HasSuffix(w, "(images.engine)") && !render.PinnedByDigest(img) {
				t.Errorf("%s: the engine image %s is not pinned by digest (@sha256:...)", w, img)
			}
		}
	}
}

// renderedImages renders examples/platform.yaml and returns each
// container's and init container's image, with the file and object.
func renderedImages(t *testing.T) map[string][]string {
	t.Helper()
	p, err := render.ParseFile(filepath.Join("..", "examples", "platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := render.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	containers := 0
	for _, f := range files {
		dec := yaml.NewDecoder(bytes.NewReader(f.Data))
		for {
			var d map[string]any
			if err := dec.Decode(&d); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
			walk(d, func(key string, v any) {
				if key != "image" {
					return
				}
				containers++
				s, ok := v.(string)
				if !ok || s == "" {
					t.Errorf("%s: %v: an image that is not a name: %v", f.Name, d["kind"], v)
					return
				}
				out[s] = append(out[s], fmt.Sprintf("%s %v", f.Name, d["kind"]))
			})
		}
	}
	if containers == 0 {
		t.Fatal("the rendered manifests name no image")
	}
	return out
}

// walk calls fn with every key and value of a decoded YAML document.
func walk(v any, fn func(key string, v any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			fn(k, x)
			walk(x, fn)
		}
	case []any:
		for _, x := range v {
			walk(x, fn)
		}
	}
}

// imageKeys hold an image wherever they are (a container's image,
// llmplat_model's deployment); imagesFields hold one inside an images
// object (the platform description's, the in-cluster layer's variable).
var (
	imageKeys    = []string{"image", "engine_image", "platform_image"}
	imagesFields = []string{"engine", "platform", "device_plugin"}
)

// sampleValues stand in for the references an image's template may hold
// (the example builds the platform image's ECR name from the account and
// region, the engine's from the module's repository and the digest of the
// copy); any other reference makes the image unreadable, and refused.
var sampleValues = map[string]string{
	"account_id":            "123456789012",
	"region":                "eu-central-1",
	"engine_repository_url": "123456789012.dkr.ecr.eu-central-1.amazonaws.com/inference/vllm-openai",
	"engine_digest":         "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
}

// terraformImages reads every .tf file under modules/ and examples/ and
// returns the strings under an image key (a literal, an optional()'s
// default, or a template of sampleValues' references).
func terraformImages(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, root := range []string{filepath.Join("..", "modules"), filepath.Join("..", "examples")} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".tf") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			file, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
			if diags.HasErrors() {
				return diags
			}
			add := func(key string, value hclsyntax.Expression) {
				if img, ok := imageString(t, path, value); ok {
					out[img] = append(out[img], fmt.Sprintf("%s (%s)", filepath.ToSlash(path), key))
				}
			}
			// images: each object under it, a type's optional() defaults too.
			images := func(e hclsyntax.Node) {
				_ = hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
					if o, ok := n.(*hclsyntax.ObjectConsExpr); ok {
						for _, item := range o.Items {
							if key := hcl.ExprAsKeyword(item.KeyExpr); slices.Contains(imagesFields, key) {
								add("images."+key, item.ValueExpr)
							}
						}
					}
					return nil
				})
			}
			found := func(key string, value hclsyntax.Expression) {
				switch {
				case slices.Contains(imageKeys, key):
					add(key, value)
				case key == "images":
					images(value)
				}
			}
			_ = hclsyntax.VisitAll(file.Body.(*hclsyntax.Body), func(n hclsyntax.Node) hcl.Diagnostics {
				switch n := n.(type) {
				case *hclsyntax.Block:
					if n.Type == "variable" && slices.Equal(n.Labels, []string{"images"}) {
						images(n.Body)
					}
				case *hclsyntax.Attribute:
					found(n.Name, n.Expr)
				case *hclsyntax.ObjectConsExpr:
					for _, item := range n.Items {
						found(hcl.ExprAsKeyword(item.KeyExpr), item.ValueExpr)
					}
				}
				return nil
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// imageString reads an image name from an expression under an image key:
// a template (a literal is one), an optional()'s default, or a
// coalesce()'s fallback. References (var.images.engine) hold no name and
// are skipped; a template of other references is refused.
func imageString(t *testing.T, path string, e hclsyntax.Expression) (string, bool) {
	t.Helper()
	switch e := e.(type) {
	case *hclsyntax.TemplateExpr:
		var b strings.Builder
		for _, part := range e.Parts {
			if lit, ok := part.(*hclsyntax.LiteralValueExpr); ok {
				b.WriteString(lit.Val.AsString())
				continue
			}
			vars := part.Variables()
			if len(vars) != 1 {
				t.Errorf("%s: an image template part that is not one reference", path)
				return "", false
			}
			last, ok := vars[0][len(vars[0])-1].(hcl.TraverseAttr)
			if !ok || sampleValues[last.Name] == "" {
				t.Errorf("%s: an image built from a reference the check cannot read", path)
				return "", false
			}
			b.WriteString(sampleValues[last.Name])
		}
		return b.String(), true
	case *hclsyntax.FunctionCallExpr:
		if (e.Name == "optional" || e.Name == "coalesce") && len(e.Args) == 2 {
			return imageString(t, path, e.Args[1])
		}
	}
	return "", false
}
