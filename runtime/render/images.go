package render

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
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

// ErrUnknownRegistry marks an image whose registry is not a publisher's.
var ErrUnknownRegistry = errors.New("not from a known publishing registry")

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

// CheckImage refuses, with ErrUnknownRegistry, an image whose registry
// does not publish it: the repository's image check (templates) and the
// rendered workloads' lint share this one list.
func CheckImage(ref string) error {
	registry, repo := splitImage(ref)
	if registry == "docker.io" {
		if _, ok := dockerHubPublishers[repo]; ok {
			return nil
		}
		for prefix, why := range movedFromDockerHub {
			if strings.HasPrefix(repo, prefix) {
				return fmt.Errorf("%s: %w: its publisher left Docker Hub (%s)", ref, ErrUnknownRegistry, why)
			}
		}
		return fmt.Errorf("%s: %w: Docker Hub, and %s is not on the list of repositories published there", ref, ErrUnknownRegistry, repo)
	}
	for _, r := range publishingRegistries {
		if r.host.MatchString(registry) {
			return nil
		}
	}
	return fmt.Errorf("%s: %w: registry %s", ref, ErrUnknownRegistry, registry)
}

// digestPinned matches the end of an image reference pinned by its
// content's digest, the only name a registry cannot point elsewhere.
var digestPinned = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// PinnedByDigest reports whether ref names its image by digest, as the
// engine's must be: the engine is ~10 GB, pulled by every GPU node that
// starts, and by digest every replica runs the image that was tested,
// whenever its node pulled it.
func PinnedByDigest(ref string) bool { return digestPinned.MatchString(ref) }
