package templates_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"gopkg.in/yaml.v3"

	"github.com/llmplat/llmplat/runtime/render"
)

// publishingRegistries are the registries an image we deploy may come
// from: each is where its publishers release, so a pinned tag there keeps
// being served and patched. A registry is not on the list because it is
// reachable, but because the images we name are published there.
var publishingRegistries = []struct {
	host *regexp.Regexp
	why  string
}{
	{regexp.MustCompile(`^public\.ecr\.aws$`), "AWS's public gallery: Karpenter, the load balancer controller, EKS add-ons"},
	{regexp.MustCompile(`^nvcr\.io$`), "NVIDIA's NGC: the device plugin and DCGM exporter since NVIDIA left Docker Hub"},
	{regexp.MustCompile(`^registry\.k8s\.io$`), "the Kubernetes project's images (k8s.gcr.io is frozen)"},
	{regexp.MustCompile(`^quay\.io$`), "Prometheus and the Prometheus Operator"},
	{regexp.MustCompile(`^ghcr\.io$`), "KEDA and other projects releasing on GitHub"},
	{regexp.MustCompile(`^[0-9]{12}\.dkr\.ecr\.[a-z]{2}(-[a-z]+)+-[0-9]\.amazonaws\.com$`), "the deploying account's ECR: llmplat's own image, built from this repository"},
}

// dockerHubPublishers are the Docker Hub repositories whose publisher
// still releases there; any other Docker Hub name (a bare name is one) is
// refused, since tags left behind by a publisher that moved stay pullable
// and look fine, but never advance.
var dockerHubPublishers = map[string]string{
	"vllm/vllm-openai": "vLLM's release images",
}

// movedFromDockerHub names Docker Hub namespaces whose publisher stopped
// releasing there, for a refusal that says where to go instead.
var movedFromDockerHub = map[string]string{
	"nvidia/": "NVIDIA's Docker Hub tags end at v0.12 of k8s-device-plugin; use nvcr.io/nvidia/...",
}

// errUnknownRegistry marks an image whose registry is not a publisher's.
var errUnknownRegistry = errors.New("not from a known publishing registry")

// splitImage returns an image reference's registry and repository, as a
// container runtime resolves them: the first path element is a registry
// when it has a dot or a port or is localhost, otherwise the image is on
// Docker Hub (docker.io, library/ for a one-element name).
func splitImage(ref string) (registry, repo string) {
	name := ref
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i >= 0 && !strings.Contains(name[i:], "/") {
		name = name[:i]
	}
	first, rest, found := strings.Cut(name, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		registry, repo = first, rest
	} else {
		registry, repo = "docker.io", name
	}
	if registry == "docker.io" || registry == "index.docker.io" || registry == "registry-1.docker.io" {
		registry = "docker.io"
		if !strings.Contains(repo, "/") {
			repo = "library/" + repo
		}
	}
	return registry, repo
}

// checkImage refuses an image whose registry does not publish it.
func checkImage(ref string) error {
	registry, repo := splitImage(ref)
	if registry == "docker.io" {
		if _, ok := dockerHubPublishers[repo]; ok {
			return nil
		}
		for prefix, why := range movedFromDockerHub {
			if strings.HasPrefix(repo, prefix) {
				return fmt.Errorf("%s: %w: its publisher left Docker Hub (%s)", ref, errUnknownRegistry, why)
			}
		}
		return fmt.Errorf("%s: %w: Docker Hub, and %s is not on the list of repositories published there", ref, errUnknownRegistry, repo)
	}
	for _, r := range publishingRegistries {
		if r.host.MatchString(registry) {
			return nil
		}
	}
	return fmt.Errorf("%s: %w: registry %s", ref, errUnknownRegistry, registry)
}

func TestCheckImage(t *testing.T) {
	tests := []struct {
		ref  string
		want bool
	}{
		{"nvcr.io/nvidia/k8s-device-plugin:v0.17.0", true},
		{"vllm/vllm-openai:v0.10.1", true},
		{"docker.io/vllm/vllm-openai:v0.10.1", true},
		{"123456789012.dkr.ecr.eu-central-1.amazonaws.com/llmplat:0.1.0", true},
		{"123456789012.dkr.ecr.us-gov-west-1.amazonaws.com/llmplat@sha256:0123", true},
		{"public.ecr.aws/karpenter/controller:1.10.0", true},
		{"registry.k8s.io/pause:3.10", true},
		{"nvidia/k8s-device-plugin:v0.17.0", false},
		{"docker.io/nvidia/k8s-device-plugin:v0.17.0", false},
		{"llmplat/llmplat:0.1.0", false},
		{"busybox", false},
		{"busybox:1.36", false},
		{"public.ecr.aws.example.com/x:1", false},
		{"evil.example.com/vllm/vllm-openai:v0.10.1", false},
		{"12345.dkr.ecr.eu-central-1.amazonaws.com/llmplat:0.1.0", false},
		{"localhost:5000/llmplat:0.1.0", false},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			err := checkImage(tt.ref)
			if got := err == nil; got != tt.want {
				t.Errorf("checkImage(%q) = %v, want accepted %v", tt.ref, err, tt.want)
			}
			if err != nil && !errors.Is(err, errUnknownRegistry) {
				t.Errorf("checkImage(%q) = %v, not errUnknownRegistry", tt.ref, err)
			}
		})
	}
}

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
		if err := checkImage(img); err != nil {
			t.Errorf("%v (in %s)", err, strings.Join(where, ", "))
		}
	}
}

// renderedImages renders examples/platform.yaml and returns each
// container's and init container's image, with the file and object.
func renderedImages(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := render.Parse(data)
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
// region); any other reference makes the image unreadable, and refused.
var sampleValues = map[string]string{"account_id": "123456789012", "region": "eu-central-1"}

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
