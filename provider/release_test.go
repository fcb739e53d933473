package provider

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// handshakeTimeout bounds the wait for the provider binary's plugin
// handshake line: it prints it once it listens, well within a second; a
// minute covers a loaded machine.
const handshakeTimeout = time.Minute

// manifestName is the registry manifest a release publishes.
const manifestName = "terraform-registry-manifest.json"

// TestRegistryManifestMatchesProvider: the registry manifest names the
// plugin protocol the provider binary serves, as a Terraform handshake
// with the built binary finds it.
func TestRegistryManifestMatchesProvider(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", manifestName))
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Version  int `json:"version"`
		Metadata struct {
			ProtocolVersions []string `json:"protocol_versions"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		t.Fatal(err)
	}
	served := servedProtocol(t)
	if want := []string{served + ".0"}; manifest.Version != 1 || !slices.Equal(manifest.Metadata.ProtocolVersions, want) {
		t.Errorf("%s: got version %d, protocol_versions %v; want version 1, protocol_versions %v (the binary serves protocol %s)",
			manifestName, manifest.Version, manifest.Metadata.ProtocolVersions, want, served)
	}
}

// servedProtocol builds the provider binary, starts it as Terraform
// does, offering protocols 5 and 6, and returns the protocol version its
// handshake line chooses.
func servedProtocol(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "terraform-provider-llmplat")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/terraform-provider-llmplat").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "TF_PLUGIN_MAGIC_COOKIE=d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
		"PLUGIN_PROTOCOL_VERSIONS=5,6")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1) // the first line, read once
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case l := <-line:
		// core protocol | app protocol | network | address | grpc | ...
		f := strings.Split(strings.TrimSpace(l), "|")
		if len(f) < 5 || f[4] != "grpc" {
			t.Fatalf("handshake line %q is not go-plugin's over gRPC", l)
		}
		return f[1]
	case <-time.After(handshakeTimeout):
		t.Fatalf("no handshake from the provider binary within %v", handshakeTimeout)
	}
	return ""
}

// TestReleaseConfigPublishesForTheRegistry: the release configuration
// builds the provider's command, per os/arch, into zips with a
// SHA256SUMS file that lists the registry manifest, signs the sums and
// attaches the manifest to the release.
func TestReleaseConfigPublishesForTheRegistry(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", ".goreleaser.yml"))
	if err != nil {
		t.Fatal(err)
	}
	type extraFile struct {
		Glob         string `yaml:"glob"`
		NameTemplate string `yaml:"name_template"`
	}
	var cfg struct {
		ProjectName string `yaml:"project_name"`
		Builds      []struct {
			Main    string   `yaml:"main"`
			Binary  string   `yaml:"binary"`
			Ldflags []string `yaml:"ldflags"`
			Goos    []string `yaml:"goos"`
			Goarch  []string `yaml:"goarch"`
		} `yaml:"builds"`
		Archives []struct {
			Formats []string `yaml:"formats"`
		} `yaml:"archives"`
		Checksum struct {
			NameTemplate string      `yaml:"name_template"`
			Algorithm    string      `yaml:"algorithm"`
			ExtraFiles   []extraFile `yaml:"extra_files"`
		} `yaml:"checksum"`
		Signs []struct {
			Artifacts string `yaml:"artifacts"`
		} `yaml:"signs"`
		Release struct {
			ExtraFiles []extraFile `yaml:"extra_files"`
		} `yaml:"release"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.ProjectName != "terraform-provider-llmplat" {
		t.Errorf("project_name: got %q, want terraform-provider-llmplat", cfg.ProjectName)
	}
	if len(cfg.Builds) != 1 {
		t.Fatalf("builds: got %d, want 1", len(cfg.Builds))
	}
	build := cfg.Builds[0]
	if _, err := os.Stat(filepath.Join("..", build.Main, "main.go")); err != nil {
		t.Errorf("builds.main %q is not the provider's command: %v", build.Main, err)
	}
	if build.Binary != "{{ .ProjectName }}_v{{ .Version }}" {
		t.Errorf("builds.binary: got %q, want the registry's {{ .ProjectName }}_v{{ .Version }}", build.Binary)
	}
	if !slices.ContainsFunc(build.Ldflags, func(f string) bool { return strings.Contains(f, "-X main.version={{ .Version }}") }) {
		t.Errorf("builds.ldflags %v do not set main.version", build.Ldflags)
	}
	if len(build.Goos) < 4 || len(build.Goarch) < 2 {
		t.Errorf("builds for %v × %v; want the registry's usual platforms", build.Goos, build.Goarch)
	}
	if len(cfg.Archives) != 1 || !slices.Equal(cfg.Archives[0].Formats, []string{"zip"}) {
		t.Errorf("archives: got %+v, want zip", cfg.Archives)
	}
	if cfg.Checksum.Algorithm != "sha256" || !strings.HasSuffix(cfg.Checksum.NameTemplate, "_SHA256SUMS") {
		t.Errorf("checksum: got %s %q, want sha256 into …_SHA256SUMS", cfg.Checksum.Algorithm, cfg.Checksum.NameTemplate)
	}
	manifest := extraFile{Glob: manifestName, NameTemplate: "{{ .ProjectName }}_{{ .Version }}_manifest.json"}
	if !slices.Contains(cfg.Checksum.ExtraFiles, manifest) {
		t.Errorf("checksum.extra_files %+v do not name %s", cfg.Checksum.ExtraFiles, manifestName)
	}
	if !slices.Contains(cfg.Release.ExtraFiles, manifest) {
		t.Errorf("release.extra_files %+v do not name %s", cfg.Release.ExtraFiles, manifestName)
	}
	if len(cfg.Signs) != 1 || cfg.Signs[0].Artifacts != "checksum" {
		t.Errorf("signs: got %+v, want one signature of the checksum file", cfg.Signs)
	}
}
